// The TP comm-overlap runtime: the GEMMs of tensor-parallel layers with sequence parallelism,
// fused with the all-gather or reduce-scatter along the sequence that surrounds them, over the
// comm layer's nonblocking point-to-point and collectives. Each function takes an OverlapChoice
// saying how the communication overlaps the GEMM (docs/tp_overlap.md):
//   none           the collective, waited, then the GEMM (the reference path);
//   ring_exchange  T steps around the TP ring: each step's GEMM runs on the chunk that has arrived
//                  while the next chunk (or, for GEMM + reduce-scatter, the partial sum) travels;
//   pipeline       the GEMM split into num_splits row chunks, each chunk's collective started as
//                  soon as it is computed (or the next chunk's all-gather in flight during a GEMM);
//   bulk           an independent collective started before a GEMM that does not need it and
//                  waited after (column_parallel_backward only).
// Matrices are row-major and contiguous; a rank's sequence shard is a contiguous block of rows
// (activations laid out sequence-first, as Megatron's [s, b, h]), shard r holding rows
// [r*m, (r+1)*m) of the gathered matrix. Every rank of the group must call with the same shapes
// and choice. Results equal the `none` path within the bound of docs/tp_overlap.md: the products
// are the same, only the order of the T-term sums of GEMM + reduce-scatter differs, so
// |overlapped - none| <= (T-1) * u * sum_r |partial_r| elementwise (u = 2^-24), plus what the BLAS
// changes when a GEMM has fewer rows (nothing for OpenBLAS's sgemm in our tests).
#pragma once

#include <cstdint>

#include "shardwise/comm/process_group.hpp"
#include "shardwise/core/blas.hpp"
#include "shardwise/tp/overlap_algorithm.hpp"

namespace shardwise::tp {

struct ConstMatrix {
  const float* data = nullptr;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
};

struct MutableMatrix {
  float* data = nullptr;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
};

// The right-hand GEMM operand op(B): B is row-major [rows, cols]; kTranspose multiplies by B^T
// (a PyTorch-layout weight [out, in] in a forward pass).
struct RightOperand {
  ConstMatrix matrix;
  blas::Op op = blas::Op::kNone;

  std::int64_t inner() const { return op == blas::Op::kNone ? matrix.rows : matrix.cols; }
  std::int64_t outer() const { return op == blas::Op::kNone ? matrix.cols : matrix.rows; }
};

// out [T*m, n] = AllGather_rows(input [m, k]) * op(b) [k, n]. When `gathered` is not null it
// receives AllGather_rows(input) [T*m, k] (what a wgrad GEMM needs next). Slots qkv_fprop,
// fc1_fprop (column-parallel forward) and proj_dgrad, fc2_dgrad (row-parallel dgrad).
// Algorithms: none, ring_exchange, pipeline (bulk has no independent GEMM here: InvalidArgument).
void all_gather_gemm(ProcessGroup& group, const OverlapChoice& choice, ConstMatrix input,
                     RightOperand b, MutableMatrix out, float* gathered = nullptr);

// out [m, n] = ReduceScatter_rows(input [T*m, k] * op(b) [k, n]): this rank's rows of the sum of
// every rank's partial product. Slots proj_fprop, fc2_fprop (row-parallel forward) and the
// dgrad of column-parallel layers. Algorithms: none, ring_exchange, pipeline.
void gemm_reduce_scatter(ProcessGroup& group, const OverlapChoice& choice, ConstMatrix input,
                         RightOperand b, MutableMatrix out);

// Backward of a column-parallel linear with sequence parallelism, y = AllGather(x) * W^T:
//   grad_input  [m, k]  = ReduceScatter_rows(grad_output [T*m, n] * W [n, k])
//   grad_weight [n, k]  = grad_weight_beta * grad_weight + grad_output^T * AllGather(x) [T*m, k]
// `dgrad` (slot qkv_dgrad / fc1_dgrad): bulk all-gathers x while the dgrad GEMM runs;
// ring_exchange / pipeline fuse the dgrad GEMM with its reduce-scatter. `wgrad` (slot qkv_wgrad /
// fc1_wgrad): bulk reduce-scatters the dgrad while the wgrad GEMM runs (with a bulk or none
// dgrad); none waits first. Other algorithms for wgrad: InvalidArgument.
struct ColumnParallelGrads {
  MutableMatrix grad_input;
  MutableMatrix grad_weight;
  float grad_weight_beta = 0.0f;  // 1 accumulates into grad_weight
};
void column_parallel_backward(ProcessGroup& group, const OverlapChoice& dgrad,
                              const OverlapChoice& wgrad, ConstMatrix input_shard,
                              ConstMatrix weight, ConstMatrix grad_output,
                              const ColumnParallelGrads& grads);

// Backward of a row-parallel linear with sequence parallelism, y = ReduceScatter(x * W^T) with
// x [T*m, k] and W [n, k]:
//   grad_input  [T*m, k] = AllGather_rows(grad_output [m, n]) * W   (all_gather_gemm, `dgrad`)
//   grad_weight [n, k]   = grad_weight_beta * grad_weight + AllGather(grad_output)^T * x
void row_parallel_backward(ProcessGroup& group, const OverlapChoice& dgrad, ConstMatrix input,
                           ConstMatrix weight, ConstMatrix grad_output_shard, MutableMatrix grad_input,
                           MutableMatrix grad_weight, float grad_weight_beta = 0.0f);

}  // namespace shardwise::tp
