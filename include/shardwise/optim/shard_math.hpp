// Where an optimizer's main params, grads and state live, and the element-wise math over them:
// the grad statistics (sum of squares, zero count, scaling), the state arrays (allocation and
// copies to and from the host for state dicts), the AdamW update and the per-matrix Muon step.
// The host implementation (host_shard_math) is the CPU path; a device implementation (the CUDA
// layer's DeviceShardMath) runs the same steps on device memory. An optimizer is given one at
// construction and never asks where its memory is.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace shardwise {
struct TensorView;
}

namespace shardwise::optim {

struct AdamWStepScalars;
struct MuonOptions;
struct OptimParam;
class OptimizerStateView;

// fp32 values owned by a ShardMath (host or device memory). Copies share the values.
class FloatArray {
 public:
  FloatArray() = default;
  FloatArray(std::shared_ptr<float> data, std::int64_t size)
      : data_(std::move(data)), size_(size) {}
  float* data() const { return data_.get(); }
  std::int64_t size() const { return size_; }

 private:
  std::shared_ptr<float> data_;
  std::int64_t size_ = 0;
};

// One Muon step of one 2-D param (weight decay, momentum, Newton–Schulz per QKV part, scaled
// update), in the memory of the ShardMath that made it.
class MuonMatrixStep {
 public:
  virtual ~MuonMatrixStep() = default;
  virtual void step(const OptimParam& p, float* momentum, double lr, double weight_decay,
                    double momentum_factor) = 0;
};

class ShardMath {
 public:
  virtual ~ShardMath() = default;

  // TensorView::kHostMemory (-1) or the CUDA device the pointers refer to.
  virtual int device() const = 0;

  // --- grad statistics (the local part; the sum over ranks is the optimizer's world reduce) ---
  virtual double sum_of_squares(const float* values, std::int64_t n) const = 0;
  virtual std::int64_t count_zeros(const float* values, std::int64_t n) const = 0;
  virtual void scale(float* values, std::int64_t n, float coeff) const = 0;

  // --- state arrays ---
  virtual FloatArray zeros(std::int64_t n) const = 0;
  // An array holding `values` (the host implementation keeps the vector, without a copy).
  virtual FloatArray adopt(std::vector<float>&& values) const = 0;
  virtual std::vector<float> to_host(const float* values, std::int64_t n) const = 0;
  // The values for a state view: a view of the array itself on the host, a host copy held by
  // `view` otherwise.
  virtual std::span<const float> view_values(const FloatArray& array,
                                             OptimizerStateView& view) const = 0;

  // --- mixed precision: fp32 main params of 16-bit model params (views in this math's memory) ---
  // main[i] = model[i] for a bf16, fp16 or fp32 `model` view (exact).
  virtual void widen(const TensorView& model, float* main) const = 0;
  // model[i] = main[i] rounded to nearest even (fp16 overflows to infinity), the CPU converters'
  // bits (core/float_convert.hpp) on every implementation.
  virtual void narrow(const float* main, const TensorView& model) const = 0;

  // --- updates ---
  virtual void adamw_update(const AdamWStepScalars& scalars, float* param, const float* grad,
                            float* exp_avg, float* exp_avg_sq, std::int64_t n) const = 0;
  virtual std::unique_ptr<MuonMatrixStep> make_muon_step(const MuonOptions& options) const = 0;

  // Throws InvalidArgument naming `what` unless `view_device` is this math's memory.
  void require_same_memory(int view_device, const std::string& what) const;
};

using ShardMathPtr = std::shared_ptr<const ShardMath>;

// The CPU path (shared, stateless).
const ShardMathPtr& host_shard_math();

}  // namespace shardwise::optim
