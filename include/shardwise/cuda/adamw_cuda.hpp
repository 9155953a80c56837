// AdamW as one fused kernel on an NVIDIA GPU: the update of optim::adamw_update (same scalars,
// AdamWStepScalars, and the same fp32 operations in the same order, nothing fused into an FMA),
// so the fp32 master weights and both moments come out bit-identical to the CPU path's. The
// gradient may be fp32, bf16 or fp16 (widened exactly to fp32 first, as the CPU path's
// mixed-precision copy does); the updated master weight can also be written, rounded to nearest
// even, into a bf16 / fp16 / fp32 model-param copy in the same pass.
//
// Needs no CUDA headers: pointers are device memory, the stream an opaque cudaStream_t.
#pragma once

#include <cstdint>

#include "shardwise/core/dtype.hpp"
#include "shardwise/optim/adamw.hpp"

namespace shardwise::cuda {

struct AdamWDeviceTensors {
  std::int64_t numel = 0;
  float* param = nullptr;  // fp32 master weights, updated in place
  const void* grad = nullptr;
  DType grad_dtype = DType::kFloat32;  // fp32, bf16 or fp16
  float* exp_avg = nullptr;
  float* exp_avg_sq = nullptr;
  void* model_param = nullptr;           // optional copy of the updated param; null = none
  DType model_dtype = DType::kBFloat16;  // fp32, bf16 or fp16
};

// One AdamW step over `t` with the scalars of optim::AdamWStepScalars::make (the caller counts
// steps, as optim::AdamW does per param). Asynchronous on `stream`; throws InvalidArgument for a
// bad dtype, negative numel or missing pointer, CudaError when the launch fails.
void adamw_update_device(const optim::AdamWStepScalars& scalars, const AdamWDeviceTensors& t,
                         void* stream = nullptr);

}  // namespace shardwise::cuda
