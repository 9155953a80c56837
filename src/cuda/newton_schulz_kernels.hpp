// The element-wise steps of Newton-Schulz between its cuBLAS products (private to
// shardwise_cuda). m x m matrices here are symmetric, so row- and column-major agree.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace shardwise::cuda::detail {

// x[i] = g[i] * inv with inv = float(1 / (sqrt(*sum_of_squares) + eps)) computed in fp64, as
// optim::NewtonSchulz normalises.
void launch_normalise(const double* sum_of_squares, float eps, const float* g, float* x,
                      std::int64_t n, cudaStream_t stream);

// a(i, j) = a(j, i) for i > j, column-major (cuBLAS's upper triangle copied to the lower one).
void launch_mirror_upper(float* a, std::int64_t m, cudaStream_t stream);

// a(i, i) += value.
void launch_add_diagonal(float* a, std::int64_t m, float value, cudaStream_t stream);

// bf16[i] = src[i] rounded to nearest even (bf16 bits); when rounded != null it also receives the
// rounded value as fp32 (it may alias src).
void launch_round_to_bf16(const float* src, std::uint16_t* bf16, float* rounded, std::int64_t n,
                          cudaStream_t stream);

}  // namespace shardwise::cuda::detail
