// Host stand-in for src/cuda/muon_kernels.hpp: optim::Muon::step_param's loops.
#pragma once

#include <cstdint>

#include "cuda_status.hpp"

namespace shardwise::cuda::detail {

struct MuonMomentumScalars {
  bool decay_param;
  float decay;
  float keep;
  float blend;
  bool nesterov;
};

inline void launch_muon_momentum(const MuonMomentumScalars& s, float* param, const float* grad,
                                 float* mom, float* u, std::int64_t n, cudaStream_t) {
  for (std::int64_t i = 0; i < n; ++i) {
    if (s.decay_param) param[i] *= s.decay;
    mom[i] = s.keep * mom[i] + s.blend * grad[i];
    u[i] = s.nesterov ? s.blend * grad[i] + s.keep * mom[i] : mom[i];
  }
}

inline void launch_apply_update(float* param, const float* u, std::int64_t n, float step,
                                cudaStream_t) {
  for (std::int64_t i = 0; i < n; ++i) param[i] -= step * u[i];
}

}  // namespace shardwise::cuda::detail
