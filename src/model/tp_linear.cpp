#include "shardwise/model/tp_linear.hpp"

#include <type_traits>

#include "shardwise/core/error.hpp"
#include "shardwise/model/dense_kernels.hpp"
#include "shardwise/model/tp_collectives.hpp"
#include "tp_linear_overlap.hpp"

namespace shardwise {

const char* tp_gemm_slot_name(TpGemmSlot slot) {
  switch (slot) {
    case TpGemmSlot::kQkv:
      return "qkv";
    case TpGemmSlot::kProj:
      return "proj";
    case TpGemmSlot::kFc1:
      return "fc1";
    case TpGemmSlot::kFc2:
      return "fc2";
    case TpGemmSlot::kOutput:
      return "output";
  }
  return "?";
}

namespace {

// The sequence-parallel row count of this rank's block.
std::int64_t local_rows(const TensorParallelOptions& tp, std::int64_t n) {
  return tp.sequence_parallel ? n / tp.size() : n;
}

}  // namespace

template <typename Scalar>
void column_parallel_forward(TpGemmSlot slot, const TensorParallelOptions& tp, const Scalar* x,
                             const Scalar* w, const Scalar* bias, std::int64_t n, std::int64_t in,
                             std::int64_t out_local, std::vector<Scalar>& y) {
  if constexpr (std::is_same_v<Scalar, float>) {
    if (tp_overlap_active(slot, tp)) {
      return overlapped_column_parallel_forward(slot, tp, x, w, bias, n, in, out_local, y);
    }
  }
  if (!tp.enabled() || !tp.sequence_parallel) {
    linear_forward(x, w, bias, n, in, out_local, y);
    return;
  }
  std::vector<Scalar> gathered;  // fprop all-gather of the sequence shards
  tp_all_gather_rows(tp, x, local_rows(tp, n), in, gathered);
  linear_forward(gathered.data(), w, bias, n, in, out_local, y);
}

template <typename Scalar>
void column_parallel_backward(TpGemmSlot slot, const TensorParallelOptions& tp, const Scalar* dy,
                              const Scalar* x, const Scalar* w, std::int64_t n, std::int64_t in,
                              std::int64_t out_local, Scalar* dw, Scalar* dbias,
                              std::vector<Scalar>& dx) {
  if constexpr (std::is_same_v<Scalar, float>) {
    if (tp_overlap_active(slot, tp)) {
      return overlapped_column_parallel_backward(slot, tp, dy, x, w, n, in, out_local, dw, dbias,
                                                 dx);
    }
  }
  if (!tp.enabled()) {
    linear_backward(dy, x, w, n, in, out_local, dw, dbias, dx);
    return;
  }
  // dgrad: this rank's partial dx over its output columns, summed over the TP ranks.
  std::vector<Scalar> partial(static_cast<std::size_t>(n * in));
  gemm<Scalar>(false, false, n, in, out_local, Scalar(1), dy, out_local, w, in, Scalar(0),
               partial.data(), in);
  // wgrad: needs the whole input; with SP it is re-gathered (Megatron keeps only the shard).
  const Scalar* input = x;
  std::vector<Scalar> gathered;
  if (tp.sequence_parallel) {
    tp_all_gather_rows(tp, x, local_rows(tp, n), in, gathered);
    input = gathered.data();
  }
  gemm<Scalar>(true, false, out_local, in, n, Scalar(1), dy, out_local, input, in, Scalar(1), dw,
               in);
  if (dbias) add_column_sums(dy, n, out_local, dbias);
  if (tp.sequence_parallel) {
    tp_reduce_scatter_rows(tp, partial.data(), n, in, dx);
  } else {
    tp_all_reduce(tp, partial.data(), n * in);
    dx = std::move(partial);
  }
}

template <typename Scalar>
void row_parallel_forward(TpGemmSlot slot, const TensorParallelOptions& tp, const Scalar* x,
                          const Scalar* w, const Scalar* bias, std::int64_t n,
                          std::int64_t in_local, std::int64_t out, std::vector<Scalar>& y) {
  if constexpr (std::is_same_v<Scalar, float>) {
    if (tp_overlap_active(slot, tp)) {
      return overlapped_row_parallel_forward(slot, tp, x, w, bias, n, in_local, out, y);
    }
  }
  if (!tp.enabled()) {
    linear_forward(x, w, bias, n, in_local, out, y);
    return;
  }
  // The bias is added once, after the sum over the TP ranks.
  std::vector<Scalar> partial;
  linear_forward(x, w, static_cast<const Scalar*>(nullptr), n, in_local, out, partial);
  if (tp.sequence_parallel) {
    tp_reduce_scatter_rows(tp, partial.data(), n, out, y);
  } else {
    tp_all_reduce(tp, partial.data(), n * out);
    y = std::move(partial);
  }
  if (bias) {
    const std::int64_t rows = local_rows(tp, n);
    for (std::int64_t i = 0; i < rows; ++i) {
      Scalar* row = y.data() + i * out;
      for (std::int64_t c = 0; c < out; ++c) row[c] += bias[c];
    }
  }
}

template <typename Scalar>
void row_parallel_backward(TpGemmSlot slot, const TensorParallelOptions& tp, const Scalar* dy,
                           const Scalar* x, const Scalar* w, std::int64_t n, std::int64_t in_local,
                           std::int64_t out, Scalar* dw, Scalar* dbias, std::vector<Scalar>& dx) {
  if constexpr (std::is_same_v<Scalar, float>) {
    if (tp_overlap_active(slot, tp)) {
      return overlapped_row_parallel_backward(slot, tp, dy, x, w, n, in_local, out, dw, dbias, dx);
    }
  }
  if (!tp.enabled() || !tp.sequence_parallel) {
    linear_backward(dy, x, w, n, in_local, out, dw, dbias, dx);
    return;
  }
  if (dbias) add_column_sums(dy, local_rows(tp, n), out, dbias);
  std::vector<Scalar> gathered;  // dgrad and wgrad both need every row of dy
  tp_all_gather_rows(tp, dy, local_rows(tp, n), out, gathered);
  linear_backward(gathered.data(), x, w, n, in_local, out, dw, static_cast<Scalar*>(nullptr), dx);
}

#define SHARDWISE_INSTANTIATE_TP_LINEAR(S)                                                      \
  template void column_parallel_forward<S>(TpGemmSlot, const TensorParallelOptions&, const S*,  \
                                           const S*, const S*, std::int64_t, std::int64_t,      \
                                           std::int64_t, std::vector<S>&);                      \
  template void column_parallel_backward<S>(TpGemmSlot, const TensorParallelOptions&, const S*, \
                                            const S*, const S*, std::int64_t, std::int64_t,     \
                                            std::int64_t, S*, S*, std::vector<S>&);             \
  template void row_parallel_forward<S>(TpGemmSlot, const TensorParallelOptions&, const S*,     \
                                        const S*, const S*, std::int64_t, std::int64_t,         \
                                        std::int64_t, std::vector<S>&);                         \
  template void row_parallel_backward<S>(TpGemmSlot, const TensorParallelOptions&, const S*,    \
                                         const S*, const S*, std::int64_t, std::int64_t,        \
                                         std::int64_t, S*, S*, std::vector<S>&);
SHARDWISE_INSTANTIATE_TP_LINEAR(float)
SHARDWISE_INSTANTIATE_TP_LINEAR(double)

}  // namespace shardwise
