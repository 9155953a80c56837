#include "cuda_status.hpp"
#include "muon_kernels.hpp"

namespace shardwise::cuda::detail {
namespace {

constexpr int kThreads = 256;
constexpr std::int64_t kMaxBlocks = 1 << 16;  // grid-stride loops cover the rest

int blocks_for(std::int64_t n) {
  const std::int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < 1 ? 1 : (blocks < kMaxBlocks ? blocks : kMaxBlocks));
}

__global__ void muon_momentum_kernel(MuonMomentumScalars s, float* param, const float* grad,
                                     float* mom, float* u, std::int64_t n) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    if (s.decay_param) param[i] = __fmul_rn(param[i], s.decay);
    const float g = grad[i];
    const float m = __fadd_rn(__fmul_rn(s.keep, mom[i]), __fmul_rn(s.blend, g));
    mom[i] = m;
    u[i] = s.nesterov ? __fadd_rn(__fmul_rn(s.blend, g), __fmul_rn(s.keep, m)) : m;
  }
}

__global__ void apply_update_kernel(float* param, const float* u, std::int64_t n, float step) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    param[i] = __fsub_rn(param[i], __fmul_rn(step, u[i]));
  }
}

}  // namespace

void launch_muon_momentum(const MuonMomentumScalars& s, float* param, const float* grad, float* mom,
                          float* u, std::int64_t n, cudaStream_t stream) {
  muon_momentum_kernel<<<blocks_for(n), kThreads, 0, stream>>>(s, param, grad, mom, u, n);
  check_launch("muon_momentum_kernel launch");
}

void launch_apply_update(float* param, const float* u, std::int64_t n, float step,
                         cudaStream_t stream) {
  apply_update_kernel<<<blocks_for(n), kThreads, 0, stream>>>(param, u, n, step);
  check_launch("apply_update_kernel launch");
}

}  // namespace shardwise::cuda::detail
