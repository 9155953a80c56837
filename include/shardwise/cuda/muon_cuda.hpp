// One Muon step of one 2-D weight on an NVIDIA GPU, as optim::Muon::step_param computes it
// without tensor parallelism: decoupled weight decay, momentum (optionally Nesterov), Newton-Schulz
// of the update per QKV part (NewtonSchulzCuda, the options' precision and coefficients), and
// param -= lr * scale * NS(update) with the options' scale mode (optim::muon_scale_factor) and
// extra_scale_factor. The element-wise parts use the CPU's fp32 operations in its order (the
// momentum buffer comes out bit-identical); the NS result carries NewtonSchulzCuda's tolerance.
// No CUDA headers: pointers are device memory, the stream an opaque cudaStream_t.
#pragma once

#include <cstdint>
#include <span>

#include "shardwise/cuda/device_buffer.hpp"
#include "shardwise/cuda/newton_schulz_cuda.hpp"
#include "shardwise/optim/muon.hpp"

namespace shardwise::cuda {

struct MuonDeviceParam {
  std::int64_t rows = 0, cols = 0;
  float* param = nullptr;  // fp32 main weights, row-major rows x cols, updated in place
  const float* grad = nullptr;
  float* momentum = nullptr;                // the momentum buffer, updated in place
  std::span<const std::int64_t> qkv_split;  // row counts of Q, K, V; empty for other weights
};

class MuonCuda {
 public:
  // Throws InvalidArgument when options.tensor_parallel is not empty (not on the device yet),
  // CudaError when cuBLAS cannot start.
  explicit MuonCuda(optim::MuonOptions options, bool allow_tf32 = false, void* stream = nullptr);

  // One step of `p` with the group's lr, weight decay and momentum (Muon::step_group resolves
  // them from the overrides). Asynchronous on the stream. Throws ShapeError for a bad qkv_split.
  void step(const MuonDeviceParam& p, double lr, double weight_decay, double momentum);

  const optim::MuonOptions& options() const { return options_; }

 private:
  optim::MuonOptions options_;
  NewtonSchulzCuda newton_schulz_;
  void* stream_;
  DeviceBuffer update_;  // u, then NS(u)
};

}  // namespace shardwise::cuda
