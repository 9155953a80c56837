// The CUDA side of the injected memory interfaces: DDP buffers in device memory
// (DeviceBufferMemory), host staging for the host-staged process group (CudaStaging), and the
// optimizers' element-wise math over device memory (DeviceShardMath: GradStatsCuda, the fused
// AdamW kernel, MuonCuda). Everything runs on the legacy default stream of `device`, so the
// synchronous copies order themselves after the kernels issued before them. No CUDA headers.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "shardwise/comm/host_staged_process_group.hpp"
#include "shardwise/cuda/grad_stats_cuda.hpp"
#include "shardwise/ddp/buffer_memory.hpp"
#include "shardwise/optim/shard_math.hpp"

namespace shardwise::cuda {

// cudaSetDevice(device); InvalidArgument naming the device and the count when it does not exist.
void use_device(int device);

// A device's name and memory as the runtime reports them (cudaGetDeviceProperties,
// cudaMemGetInfo); makes it the current device first (use_device). CudaError when a call fails.
struct DeviceDescription {
  std::string name;
  std::size_t free_bytes = 0;
  std::size_t total_bytes = 0;
};
DeviceDescription describe_device(int device);

class DeviceBufferMemory final : public BufferMemory {
 public:
  explicit DeviceBufferMemory(int device);
  int device() const override { return device_; }
  std::shared_ptr<std::byte> allocate_zeroed(std::size_t nbytes) const override;
  void zero(TensorView view) const override;
  // fp32 only (device grad buffers are fp32: grad_reduce_in_fp32); InvalidArgument otherwise.
  void scale(TensorView view, double factor) const override;

 private:
  int device_;
  mutable GradStatsCuda stats_;
};

class CudaStaging final : public DeviceStaging {
 public:
  std::shared_ptr<std::byte> allocate_host(std::size_t nbytes) override;  // cudaMallocHost
  void copy_to_host(void* host, const TensorView& device) override;
  void copy_to_device(const TensorView& device, const void* host) override;
};

class DeviceShardMath final : public optim::ShardMath {
 public:
  // `allow_tf32` for Muon's Newton–Schulz (off: fp32 GEMMs, the CPU's results within rounding).
  explicit DeviceShardMath(int device, bool allow_tf32 = false);
  int device() const override { return device_; }

  double sum_of_squares(const float* values, std::int64_t n) const override;
  std::int64_t count_zeros(const float* values, std::int64_t n) const override;
  void scale(float* values, std::int64_t n, float coeff) const override;

  optim::FloatArray zeros(std::int64_t n) const override;
  optim::FloatArray adopt(std::vector<float>&& values) const override;
  std::vector<float> to_host(const float* values, std::int64_t n) const override;
  std::span<const float> view_values(const optim::FloatArray& array,
                                     optim::OptimizerStateView& view) const override;

  // Conversion kernels (mixed_precision_cuda.hpp); InvalidArgument for a view on another device.
  void widen(const TensorView& model, float* main) const override;
  void narrow(const float* main, const TensorView& model) const override;

  void adamw_update(const optim::AdamWStepScalars& scalars, float* param, const float* grad,
                    float* exp_avg, float* exp_avg_sq, std::int64_t n) const override;
  std::unique_ptr<optim::MuonMatrixStep> make_muon_step(
      const optim::MuonOptions& options) const override;

 private:
  int device_;
  bool allow_tf32_;
  mutable GradStatsCuda stats_;
};

}  // namespace shardwise::cuda
