// Token and learned position embeddings of the device GPT, forward and backward.
#include "cuda_status.hpp"
#include "gpt_kernel_support.cuh"
#include "gpt_kernels.hpp"

namespace shardwise::cuda::detail {
namespace {

using gpt::blocks_for;
using gpt::first_index;
using gpt::grid_stride;
using gpt::kThreads;

__global__ void embedding_forward_kernel(const std::int32_t* tokens, const float* wte,
                                         const float* wpe, std::int64_t n, int seq, int hidden,
                                         float* x) {
  for (std::int64_t e = first_index(); e < n * hidden; e += grid_stride()) {
    const std::int64_t i = e / hidden, c = e % hidden;
    float v = wte[static_cast<std::int64_t>(tokens[i]) * hidden + c];
    if (wpe != nullptr) v += wpe[(i % seq) * hidden + c];
    x[e] = v;
  }
}

__global__ void embedding_backward_kernel(const std::int32_t* tokens, const float* dx,
                                          std::int64_t n, int hidden, float* wte_grad) {
  for (std::int64_t e = first_index(); e < n * hidden; e += grid_stride()) {
    const std::int64_t i = e / hidden, c = e % hidden;
    atomicAdd(wte_grad + static_cast<std::int64_t>(tokens[i]) * hidden + c, dx[e]);
  }
}

__global__ void position_backward_kernel(const float* dx, int batch, int seq, int hidden,
                                         float* wpe_grad) {
  const std::int64_t count = static_cast<std::int64_t>(seq) * hidden;
  for (std::int64_t e = first_index(); e < count; e += grid_stride()) {
    float g = wpe_grad[e];
    for (int b = 0; b < batch; ++b) g += dx[static_cast<std::int64_t>(b) * count + e];
    wpe_grad[e] = g;
  }
}

}  // namespace

void launch_embedding_forward(const std::int32_t* tokens, const float* wte, const float* wpe,
                              std::int64_t n, int seq, int hidden, float* x, cudaStream_t stream) {
  embedding_forward_kernel<<<blocks_for(n * hidden), kThreads, 0, stream>>>(tokens, wte, wpe, n,
                                                                            seq, hidden, x);
  check_launch("embedding_forward_kernel");
}

void launch_embedding_backward(const std::int32_t* tokens, const float* dx, std::int64_t n,
                               int hidden, float* wte_grad, cudaStream_t stream) {
  embedding_backward_kernel<<<blocks_for(n * hidden), kThreads, 0, stream>>>(tokens, dx, n, hidden,
                                                                             wte_grad);
  check_launch("embedding_backward_kernel");
}

void launch_position_backward(const float* dx, int batch, int seq, int hidden, float* wpe_grad,
                              cudaStream_t stream) {
  const std::int64_t count = static_cast<std::int64_t>(seq) * hidden;
  position_backward_kernel<<<blocks_for(count), kThreads, 0, stream>>>(dx, batch, seq, hidden,
                                                                       wpe_grad);
  check_launch("position_backward_kernel");
}

}  // namespace shardwise::cuda::detail
