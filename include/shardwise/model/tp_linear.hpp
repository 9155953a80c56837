// The tensor-parallel linear layers of the reference GPT, one call site per GEMM slot (the slots
// of Megatron's tp_comm_overlap_cfg: qkv, proj, fc1, fc2, each with fprop, dgrad and wgrad), so a
// slot's communication can be overlapped with its GEMM without touching the model.
//
// n is the number of (batch*seq) rows of the full sequence. With sequence parallelism a layer's
// sequence-sharded side holds n/T rows (this rank's contiguous block); without it, n rows.
// Without TP these are exactly linear_forward / linear_backward.
#pragma once

#include <cstdint>
#include <vector>

#include "shardwise/model/tensor_parallel.hpp"

namespace shardwise {

enum class TpGemmSlot { kQkv, kProj, kFc1, kFc2, kOutput };
const char* tp_gemm_slot_name(TpGemmSlot slot);  // "qkv", "proj", "fc1", "fc2", "output"

// Column-parallel (weight split along its output rows): y[n, out_local] = X w^T + bias, where X is
// x all-gathered along the sequence with SP (x: [n/T, in]) or x itself (x: [n, in]).
template <typename Scalar>
void column_parallel_forward(TpGemmSlot slot, const TensorParallelOptions& tp, const Scalar* x,
                             const Scalar* w, const Scalar* bias, std::int64_t n, std::int64_t in,
                             std::int64_t out_local, std::vector<Scalar>& y);

// Its backward. dgrad: dx = dy w summed over the TP ranks (reduce-scattered to [n/T, in] with SP,
// all-reduced to [n, in] without). wgrad: dw += dy^T X (X re-gathered with SP), dbias += column
// sums of dy (dbias may be null).
template <typename Scalar>
void column_parallel_backward(TpGemmSlot slot, const TensorParallelOptions& tp, const Scalar* dy,
                              const Scalar* x, const Scalar* w, std::int64_t n, std::int64_t in,
                              std::int64_t out_local, Scalar* dw, Scalar* dbias,
                              std::vector<Scalar>& dx);

// Row-parallel (weight split along its input columns): y = x w^T summed over the TP ranks
// (reduce-scattered to [n/T, out] with SP, all-reduced to [n, out] without), then + bias.
// x: [n, in_local].
template <typename Scalar>
void row_parallel_forward(TpGemmSlot slot, const TensorParallelOptions& tp, const Scalar* x,
                          const Scalar* w, const Scalar* bias, std::int64_t n,
                          std::int64_t in_local, std::int64_t out, std::vector<Scalar>& y);

// Its backward: dy is [n/T, out] with SP (all-gathered here) or [n, out]. dgrad: dx[n, in_local] =
// DY w; wgrad: dw += DY^T x; dbias += column sums of this rank's dy rows (with SP a partial sum
// the caller all-reduces over the TP group).
template <typename Scalar>
void row_parallel_backward(TpGemmSlot slot, const TensorParallelOptions& tp, const Scalar* dy,
                           const Scalar* x, const Scalar* w, std::int64_t n, std::int64_t in_local,
                           std::int64_t out, Scalar* dw, Scalar* dbias, std::vector<Scalar>& dx);

}  // namespace shardwise
