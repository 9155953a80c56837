// The deterministic fp64 sum of squares used by grad norms and by Newton-Schulz's normalisation
// (private to shardwise_cuda): pass 1 writes one partial per block, pass 2 adds the partials in
// index order in one block. The grid depends only on n, so the same input gives the same bits.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace shardwise::cuda::detail {

// Number of partials pass 1 writes for n elements (>= 1 for n >= 1).
int sum_of_squares_partials(std::int64_t n);

// partials[0 .. sum_of_squares_partials(n)) = the blocks' sums of x[i]^2 (each term in fp64).
void launch_sum_of_squares_partials(const float* x, std::int64_t n, double* partials,
                                    cudaStream_t stream);

// *out = partials[0] + ... + partials[count - 1] (fp64, fixed order); count >= 0.
void launch_sum_partials(const double* partials, std::int64_t count, double* out,
                         cudaStream_t stream);

}  // namespace shardwise::cuda::detail
