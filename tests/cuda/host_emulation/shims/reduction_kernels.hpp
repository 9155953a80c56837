// Host stand-in for src/cuda/reduction_kernels.hpp: the fp64 sum of squares in one partial.
#pragma once

#include <cstdint>

#include "cuda_status.hpp"

namespace shardwise::cuda::detail {

inline int sum_of_squares_partials(std::int64_t) { return 1; }

inline void launch_sum_of_squares_partials(const float* x, std::int64_t n, double* partials,
                                           cudaStream_t) {
  double sum = 0.0;
  for (std::int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  partials[0] = sum;
}

inline void launch_sum_partials(const double* partials, std::int64_t count, double* out,
                                cudaStream_t) {
  double sum = 0.0;
  for (std::int64_t i = 0; i < count; ++i) sum += partials[i];
  *out = sum;
}

}  // namespace shardwise::cuda::detail
