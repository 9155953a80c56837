// Mixed precision on the device: the fp32 main params of bf16 / fp16 model params, widened from
// and rounded back into device views with the CPU converters' bits (round to nearest even, fp16
// overflow to infinity, NaN as the CPU's quiet NaN), so a device optimizer's 16-bit params equal
// the host path's. Asynchronous on the legacy default stream of the current device; no CUDA
// headers.
#pragma once

#include "shardwise/core/tensor_view.hpp"

namespace shardwise::cuda {

// main[i] = model[i] for a bf16, fp16 or fp32 device view (exact). InvalidArgument for a host
// view or another dtype.
void widen_to_main_device(const TensorView& model, float* main);

// model[i] = main[i] rounded to the view's dtype (bf16, fp16 or fp32). InvalidArgument for a host
// view or another dtype.
void narrow_from_main_device(const float* main, const TensorView& model);

}  // namespace shardwise::cuda
