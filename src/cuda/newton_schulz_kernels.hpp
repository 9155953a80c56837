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

// x[i] = bf16(g[i] * inv), the same normalisation rounded to bf16 (bits): the first GEMM input
// of the bf16 iteration.
void launch_normalise_to_bf16(const double* sum_of_squares, float eps, const float* g,
                              std::uint16_t* x, std::int64_t n, cudaStream_t stream);

// a(i, j) = a(j, i) for i > j, column-major (cuBLAS's upper triangle copied to the lower one), for
// fp32 and bf16 (bits) matrices.
void launch_mirror_upper(float* a, std::int64_t m, cudaStream_t stream);
void launch_mirror_upper(std::uint16_t* a, std::int64_t m, cudaStream_t stream);

// a(i, i) += value.
void launch_add_diagonal(float* a, std::int64_t m, float value, cudaStream_t stream);

// bf16[i] = round-to-nearest-even of src[i]; also rounded[i] = that value in fp32 unless null
// (the device GPT's bf16 GEMM inputs use it too).
void launch_round_to_bf16(const float* src, std::uint16_t* bf16, float* rounded, std::int64_t n,
                          cudaStream_t stream);

// out[i] = bf16[i] as fp32 (exact).
void launch_widen_bf16(const std::uint16_t* bf16, float* out, std::int64_t n, cudaStream_t stream);

// Gram Newton-Schulz's P = (c R^2 + b R) + a I for m x m matrices, with R^2 in fp32 and R, P
// fp32 or bf16 (bits), each operation rounded in fp32 in that order as optim's CPU path does.
void launch_gram_polynomial(const float* r2, const float* r, float* p, std::int64_t m, float a,
                            float b, float c, cudaStream_t stream);
void launch_gram_polynomial(const float* r2, const std::uint16_t* r, std::uint16_t* p,
                            std::int64_t m, float a, float b, float c, cudaStream_t stream);

}  // namespace shardwise::cuda::detail
