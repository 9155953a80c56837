#include "cuda_status.hpp"
#include "reduction_kernels.hpp"

namespace shardwise::cuda::detail {
namespace {

constexpr int kThreads = 256;
constexpr std::int64_t kElementsPerThread = 8;  // before a block needs a second pass over x
constexpr std::int64_t kMaxPartials = 1024;

// The block's sum of the per-thread values, a tree in shared memory (fixed order): thread 0
// gets it.
__device__ double block_sum(double value) {
  __shared__ double lanes[kThreads];
  lanes[threadIdx.x] = value;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half) lanes[threadIdx.x] += lanes[threadIdx.x + half];
    __syncthreads();
  }
  return lanes[0];
}

__global__ void sum_of_squares_partials_kernel(const float* x, std::int64_t n, double* partials) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * kThreads;
  double sum = 0.0;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < n;
       i += stride) {
    const double v = x[i];
    sum += v * v;
  }
  const double total = block_sum(sum);
  if (threadIdx.x == 0) partials[blockIdx.x] = total;
}

__global__ void sum_partials_kernel(const double* partials, std::int64_t count, double* out) {
  double sum = 0.0;
  for (std::int64_t i = threadIdx.x; i < count; i += kThreads) sum += partials[i];
  const double total = block_sum(sum);
  if (threadIdx.x == 0) *out = total;
}

}  // namespace

int sum_of_squares_partials(std::int64_t n) {
  const std::int64_t per_block = kThreads * kElementsPerThread;
  const std::int64_t blocks = (n + per_block - 1) / per_block;
  return static_cast<int>(blocks < 1 ? 1 : (blocks < kMaxPartials ? blocks : kMaxPartials));
}

void launch_sum_of_squares_partials(const float* x, std::int64_t n, double* partials,
                                    cudaStream_t stream) {
  sum_of_squares_partials_kernel<<<sum_of_squares_partials(n), kThreads, 0, stream>>>(x, n,
                                                                                      partials);
  check_launch("sum_of_squares_partials_kernel launch");
}

void launch_sum_partials(const double* partials, std::int64_t count, double* out,
                         cudaStream_t stream) {
  sum_partials_kernel<<<1, kThreads, 0, stream>>>(partials, count, out);
  check_launch("sum_partials_kernel launch");
}

}  // namespace shardwise::cuda::detail
