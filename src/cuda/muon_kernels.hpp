// Muon's element-wise passes (private to shardwise_cuda), optim::Muon::step_param's loops with
// the same fp32 operations in the same order.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace shardwise::cuda::detail {

struct MuonMomentumScalars {
  bool decay_param;  // weight decay != 0
  float decay;       // 1 - lr * wd
  float keep;        // momentum
  float blend;       // 1 - momentum
  bool nesterov;
};

// param *= decay (when decay_param); mom = keep mom + blend grad; u = nesterov ? blend grad +
// keep mom : mom.
void launch_muon_momentum(const MuonMomentumScalars& s, float* param, const float* grad, float* mom,
                          float* u, std::int64_t n, cudaStream_t stream);

// param[i] -= step * u[i].
void launch_apply_update(float* param, const float* u, std::int64_t n, float step,
                         cudaStream_t stream);

}  // namespace shardwise::cuda::detail
