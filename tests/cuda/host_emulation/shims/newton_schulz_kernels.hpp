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

inline void launch_normalise_to_bf16(const double* sum_of_squares, float eps, const float* g,
                                     std::uint16_t* x, std::int64_t n, cudaStream_t) {
  const auto inv =
      static_cast<float>(1.0 / (std::sqrt(*sum_of_squares) + static_cast<double>(eps)));
  for (std::int64_t i = 0; i < n; ++i) x[i] = float_to_bf16(g[i] * inv);
}

template <typename T>
void launch_mirror_upper(T* a, std::int64_t m, cudaStream_t) {
  for (std::int64_t j = 0; j < m; ++j) {
    for (std::int64_t i = j + 1; i < m; ++i) a[i + j * m] = a[j + i * m];
  }
}

inline void launch_add_diagonal(float* a, std::int64_t m, float value, cudaStream_t) {
  for (std::int64_t i = 0; i < m; ++i) a[i * m + i] += value;
}

inline void launch_widen_bf16(const std::uint16_t* bf16, float* out, std::int64_t n, cudaStream_t) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = bf16_to_float(bf16[i]);
}

inline void launch_gram_polynomial(const float* r2, const float* r, float* p, std::int64_t m,
                                   float a, float b, float c, cudaStream_t) {
  for (std::int64_t i = 0; i < m * m; ++i) {
    float v = c * r2[i] + b * r[i];
    if (i % (m + 1) == 0) v += a;
    p[i] = v;
  }
}

inline void launch_gram_polynomial(const float* r2, const std::uint16_t* r, std::uint16_t* p,
                                   std::int64_t m, float a, float b, float c, cudaStream_t) {
  for (std::int64_t i = 0; i < m * m; ++i) {
    float v = c * r2[i] + b * bf16_to_float(r[i]);
    if (i % (m + 1) == 0) v += a;
    p[i] = float_to_bf16(v);
  }
}

}  // namespace shardwise::cuda::detail
