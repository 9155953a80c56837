// Cross-entropy over the vocabulary for the device GPT: one block per row finds the largest logit
// (and its lowest index, for exact match), sums the exponentials in fp64 as the CPU model does,
// writes the softmax in place and the row's loss; backward turns the softmax into the logits'
// gradient in place.
#include <cfloat>

#include "cuda_status.hpp"
#include "gpt_kernel_support.cuh"
#include "gpt_kernels.hpp"

namespace shardwise::cuda::detail {
namespace {

using gpt::blocks_for;
using gpt::first_index;
using gpt::grid_stride;
using gpt::kThreads;
using gpt::warp_sum;

constexpr int kWarps = kThreads / 32;

// The larger of two (value, index) pairs; the lower index among equal values.
__device__ __forceinline__ void keep_max(float& v, int& i, float ov, int oi) {
  if (ov > v || (ov == v && oi < i)) {
    v = ov;
    i = oi;
  }
}

// Block-wide argmax: every thread gets the row's largest value and its lowest index.
__device__ void block_argmax(float& v, int& i) {
  __shared__ float values[kWarps];
  __shared__ int indices[kWarps];
  for (int offset = 16; offset > 0; offset >>= 1) {
    keep_max(v, i, __shfl_xor_sync(0xffffffffu, v, offset),
             __shfl_xor_sync(0xffffffffu, i, offset));
  }
  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  if (lane == 0) {
    values[warp] = v;
    indices[warp] = i;
  }
  __syncthreads();
  v = values[0];
  i = indices[0];
  for (int w = 1; w < kWarps; ++w) keep_max(v, i, values[w], indices[w]);
  __syncthreads();
}

__device__ double block_sum(double s) {
  __shared__ double sums[kWarps];
  s = warp_sum(s);
  if (threadIdx.x % 32 == 0) sums[threadIdx.x / 32] = s;
  __syncthreads();
  double total = 0.0;
  for (int w = 0; w < kWarps; ++w) total += sums[w];
  __syncthreads();
  return total;
}

__global__ void softmax_cross_entropy_kernel(float* logits, const std::int32_t* targets,
                                             std::int64_t vocab, double* row_loss,
                                             std::int32_t* argmax) {
  const std::int64_t row = blockIdx.x;
  float* l = logits + row * vocab;
  float mx = -FLT_MAX;
  int at = 0x7fffffff;
  for (std::int64_t c = threadIdx.x; c < vocab; c += blockDim.x) {
    keep_max(mx, at, l[c], static_cast<int>(c));
  }
  block_argmax(mx, at);
  double partial = 0.0;
  for (std::int64_t c = threadIdx.x; c < vocab; c += blockDim.x) partial += exp(double(l[c] - mx));
  const double sum = block_sum(partial);
  const std::int32_t target = targets[row];
  if (threadIdx.x == 0) {
    row_loss[row] = target >= 0 ? log(sum) - static_cast<double>(l[target] - mx) : 0.0;
    argmax[row] = at;
  }
  __syncthreads();  // l[target] is read above before the row is overwritten below
  const double inv = 1.0 / sum;
  for (std::int64_t c = threadIdx.x; c < vocab; c += blockDim.x) {
    l[c] = static_cast<float>(exp(double(l[c] - mx)) * inv);
  }
}

__global__ void cross_entropy_backward_kernel(float* probs, const std::int32_t* targets,
                                              std::int64_t n, std::int64_t vocab, float scale) {
  for (std::int64_t e = first_index(); e < n * vocab; e += grid_stride()) {
    const std::int64_t row = e / vocab, c = e % vocab;
    const std::int32_t target = targets[row];
    if (target < 0) {
      probs[e] = 0.0f;
    } else {
      const float p = c == target ? probs[e] - 1.0f : probs[e];
      probs[e] = p * scale;
    }
  }
}

}  // namespace

void launch_softmax_cross_entropy(float* logits, const std::int32_t* targets, std::int64_t n,
                                  std::int64_t vocab, double* row_loss, std::int32_t* argmax,
                                  cudaStream_t stream) {
  softmax_cross_entropy_kernel<<<static_cast<unsigned>(n), kThreads, 0, stream>>>(
      logits, targets, vocab, row_loss, argmax);
  check_launch("softmax_cross_entropy_kernel");
}

void launch_cross_entropy_backward(float* probs, const std::int32_t* targets, std::int64_t n,
                                   std::int64_t vocab, float scale, cudaStream_t stream) {
  cross_entropy_backward_kernel<<<blocks_for(n * vocab), kThreads, 0, stream>>>(probs, targets, n,
                                                                                vocab, scale);
  check_launch("cross_entropy_backward_kernel");
}

}  // namespace shardwise::cuda::detail
