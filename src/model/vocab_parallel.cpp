#include "shardwise/model/vocab_parallel.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "shardwise/model/tp_collectives.hpp"

namespace shardwise {

template <typename Scalar>
void vocab_parallel_embedding_lookup(const std::int32_t* tokens, std::int64_t n,
                                     const Scalar* table, std::int64_t v_begin,
                                     std::int64_t v_local, std::int64_t h, Scalar* out) {
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t row = tokens[i] - v_begin;
    Scalar* dst = out + i * h;
    if (row < 0 || row >= v_local) {
      std::fill(dst, dst + h, Scalar(0));
    } else {
      std::copy(table + row * h, table + (row + 1) * h, dst);
    }
  }
}

template <typename Scalar>
void vocab_parallel_embedding_backward(const std::int32_t* tokens, std::int64_t n,
                                       const Scalar* dout, std::int64_t v_begin,
                                       std::int64_t v_local, std::int64_t h, Scalar* grad) {
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t row = tokens[i] - v_begin;
    if (row < 0 || row >= v_local) continue;
    Scalar* g = grad + row * h;
    const Scalar* d = dout + i * h;
    for (std::int64_t c = 0; c < h; ++c) g[c] += d[c];
  }
}

template <typename Scalar>
double vocab_parallel_cross_entropy(const TensorParallelOptions& tp, std::vector<Scalar>& logits,
                                    const std::vector<std::int32_t>& targets, std::int64_t n,
                                    std::int64_t v_local, std::int64_t vocab_size,
                                    std::int64_t& counted) {
  const std::int64_t v_begin = v_local * tp.rank();
  // Columns of real vocabulary entries in this slice; the rest is padding.
  const std::int64_t valid = std::clamp<std::int64_t>(vocab_size - v_begin, 0, v_local);
  // Row maxima over the whole vocabulary (max all-reduce) keep exp() in range.
  std::vector<Scalar> row_max(static_cast<std::size_t>(n), std::numeric_limits<Scalar>::lowest());
  for (std::int64_t i = 0; i < n; ++i) {
    const Scalar* row = logits.data() + i * v_local;
    if (valid > 0) row_max[i] = *std::max_element(row, row + valid);
  }
  tp_all_reduce(tp, row_max.data(), n, ReduceOp::kMax);
  // [sum of exp | target logit - max] per row, summed over the slices (one all-reduce).
  std::vector<Scalar> sums(static_cast<std::size_t>(2 * n), Scalar(0));
  for (std::int64_t i = 0; i < n; ++i) {
    const Scalar* row = logits.data() + i * v_local;
    double sum = 0;
    for (std::int64_t c = 0; c < valid; ++c)
      sum += std::exp(static_cast<double>(row[c] - row_max[i]));
    sums[i] = static_cast<Scalar>(sum);
    const std::int64_t t = targets[i] - v_begin;
    if (targets[i] >= 0 && t >= 0 && t < valid) sums[n + i] = row[t] - row_max[i];
  }
  tp_all_reduce(tp, sums.data(), 2 * n);
  double total = 0;
  counted = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    if (targets[i] >= 0) {
      total += std::log(static_cast<double>(sums[i])) - static_cast<double>(sums[n + i]);
      ++counted;
    }
    Scalar* row = logits.data() + i * v_local;
    const double inv = 1.0 / static_cast<double>(sums[i]);
    for (std::int64_t c = 0; c < valid; ++c) {
      row[c] = static_cast<Scalar>(std::exp(static_cast<double>(row[c] - row_max[i])) * inv);
    }
    std::fill(row + valid, row + v_local, Scalar(0));
  }
  return counted > 0 ? total / static_cast<double>(counted) : 0.0;
}

#define SHARDWISE_INSTANTIATE_VOCAB_PARALLEL(S)                                                   \
  template void vocab_parallel_embedding_lookup<S>(const std::int32_t*, std::int64_t, const S*,   \
                                                   std::int64_t, std::int64_t, std::int64_t, S*); \
  template void vocab_parallel_embedding_backward<S>(                                             \
      const std::int32_t*, std::int64_t, const S*, std::int64_t, std::int64_t, std::int64_t, S*); \
  template double vocab_parallel_cross_entropy<S>(const TensorParallelOptions&, std::vector<S>&,  \
                                                  const std::vector<std::int32_t>&, std::int64_t, \
                                                  std::int64_t, std::int64_t, std::int64_t&);
SHARDWISE_INSTANTIATE_VOCAB_PARALLEL(float)
SHARDWISE_INSTANTIATE_VOCAB_PARALLEL(double)

}  // namespace shardwise
