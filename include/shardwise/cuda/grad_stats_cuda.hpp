// Gradient statistics on an NVIDIA GPU over a list of device spans (the local part of
// Optimizer::get_grad_norm / count_zeros / scale_grads; the reduction over ranks stays the
// caller's): the sum of squares accumulated in fp64 with a fixed summation order (same bits on
// every run for the same spans), the zero count, and clipping by Megatron's coefficient
// (optim::clip_coefficient). Same results as optim/grad_stats.hpp up to the summation order of
// the fp64 sum. No CUDA headers: pointers are device memory, the stream an opaque cudaStream_t.
#pragma once

#include <cstdint>
#include <span>

#include "shardwise/cuda/device_buffer.hpp"

namespace shardwise::cuda {

struct DeviceSpan {
  float* data = nullptr;  // device memory
  std::int64_t size = 0;
};

struct ClipResult {
  double grad_norm = 0.0;   // sqrt of the sum of squares over every span
  double clip_coeff = 1.0;  // the factor the spans were scaled by (1: not scaled)
};

// Holds the reduction scratch, reused across calls. Calls run on `stream` and those that return
// a number wait for it.
class GradStatsCuda {
 public:
  explicit GradStatsCuda(void* stream = nullptr) : stream_(stream) {}

  double sum_of_squares(std::span<const DeviceSpan> spans);
  std::int64_t count_zeros(std::span<const DeviceSpan> spans);
  // values[i] *= coeff in fp32 (asynchronous).
  void scale(std::span<const DeviceSpan> spans, float coeff);
  // Optimizer::step's clipping for one rank: norm = sqrt(sum of squares); when it is finite,
  // max_norm > 0 and clip_coefficient(norm, max_norm) < 1, every span is scaled by it.
  ClipResult clip(std::span<const DeviceSpan> spans, double max_norm);

 private:
  void* stream_;
  DeviceBuffer partials_;  // one fp64 (or count) per block of every span
  DeviceBuffer result_;    // the final fp64 sum or count
};

}  // namespace shardwise::cuda
