// Host stand-in for src/cuda/newton_schulz_kernels.hpp: each kernel's specification as a loop.
#pragma once

#include <cmath>
#include <cstdint>

#include "cuda_status.hpp"

namespace shardwise::cuda::detail {

inline void launch_normalise(const double* sum_of_squares, float eps, const float* g, float* x,
                             std::int64_t n, cudaStream_t) {
  const auto inv =
      static_cast<float>(1.0 / (std::sqrt(*sum_of_squares) + static_cast<double>(eps)));
  for (std::int64_t i = 0; i < n; ++i) x[i] = g[i] * inv;
}

inline void launch_mirror_upper(float* a, std::int64_t m, cudaStream_t) {
  for (std::int64_t j = 0; j < m; ++j) {
    for (std::int64_t i = j + 1; i < m; ++i) a[i + j * m] = a[j + i * m];
  }
}

inline void launch_add_diagonal(float* a, std::int64_t m, float value, cudaStream_t) {
  for (std::int64_t i = 0; i < m; ++i) a[i * m + i] += value;
}

inline void launch_round_to_bf16(const float* src, std::uint16_t* bf16, float* rounded,
                                 std::int64_t n, cudaStream_t) {
  for (std::int64_t i = 0; i < n; ++i) {
    const bf16_bits h = float_to_bf16(src[i]);
    bf16[i] = h;
    if (rounded != nullptr) rounded[i] = bf16_to_float(h);
  }
}

}  // namespace shardwise::cuda::detail
