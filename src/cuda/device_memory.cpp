#include "shardwise/cuda/device_memory.hpp"

#include <utility>

#include "cuda_status.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/cuda/adamw_cuda.hpp"
#include "shardwise/cuda/mixed_precision_cuda.hpp"
#include "shardwise/cuda/muon_cuda.hpp"
#include "shardwise/optim/optimizer.hpp"
#include "shardwise/optim/optimizer_state_view.hpp"

namespace shardwise::cuda {

using detail::check_cuda;

void use_device(int device) {
  const int count = device_count();
  SW_REQUIRE(device >= 0 && device < count, InvalidArgument, "CUDA device ", device,
             " does not exist: this machine has ", count, count == 1 ? " device" : " devices");
  check_cuda(cudaSetDevice(device), "cudaSetDevice");
}

DeviceDescription describe_device(int device) {
  use_device(device);
  cudaDeviceProp props{};
  check_cuda(cudaGetDeviceProperties(&props, device), "cudaGetDeviceProperties");
  DeviceDescription d;
  d.name = props.name;
  check_cuda(cudaMemGetInfo(&d.free_bytes, &d.total_bytes), "cudaMemGetInfo");
  return d;
}

namespace {

std::shared_ptr<std::byte> device_bytes(std::size_t nbytes) {
  void* p = nullptr;
  // cudaMalloc aligns to 256 bytes; never zero bytes, so every buffer has an address.
  check_cuda(cudaMalloc(&p, nbytes == 0 ? 1 : nbytes), "cudaMalloc");
  return {static_cast<std::byte*>(p), [](std::byte* q) { cudaFree(q); }};
}

void require_device_view(const TensorView& view, int device, const char* what) {
  SW_REQUIRE(view.device == device, InvalidArgument, what, ": the view is on ",
             view.on_device() ? str_cat("CUDA device ", view.device) : std::string("the host"),
             ", expected CUDA device ", device);
}

}  // namespace

DeviceBufferMemory::DeviceBufferMemory(int device) : device_(device) { use_device(device); }

std::shared_ptr<std::byte> DeviceBufferMemory::allocate_zeroed(std::size_t nbytes) const {
  std::shared_ptr<std::byte> bytes = device_bytes(nbytes);
  check_cuda(cudaMemset(bytes.get(), 0, nbytes), "cudaMemset");
  return bytes;
}

void DeviceBufferMemory::zero(TensorView view) const {
  require_device_view(view, device_, "DeviceBufferMemory::zero");
  if (view.numel > 0) check_cuda(cudaMemset(view.data, 0, view.nbytes()), "cudaMemset");
}

void DeviceBufferMemory::scale(TensorView view, double factor) const {
  require_device_view(view, device_, "DeviceBufferMemory::scale");
  if (factor == 1.0) return;
  SW_REQUIRE(view.dtype == DType::kFloat32, InvalidArgument,
             "device gradient buffers must be fp32 (grad_reduce_in_fp32), not ",
             dtype_name(view.dtype));
  const DeviceSpan span{view.as<float>(), view.numel};
  stats_.scale({&span, 1}, static_cast<float>(factor));
}

std::shared_ptr<std::byte> CudaStaging::allocate_host(std::size_t nbytes) {
  void* p = nullptr;
  check_cuda(cudaMallocHost(&p, nbytes == 0 ? 1 : nbytes), "cudaMallocHost");
  return {static_cast<std::byte*>(p), [](std::byte* q) { cudaFreeHost(q); }};
}

void CudaStaging::copy_to_host(void* host, const TensorView& device) {
  check_cuda(cudaMemcpy(host, device.data, device.nbytes(), cudaMemcpyDeviceToHost),
             "cudaMemcpy to the host staging");
}

void CudaStaging::copy_to_device(const TensorView& device, const void* host) {
  check_cuda(cudaMemcpy(device.data, host, device.nbytes(), cudaMemcpyHostToDevice),
             "cudaMemcpy from the host staging");
}

namespace {

class DeviceMuonStep final : public optim::MuonMatrixStep {
 public:
  DeviceMuonStep(const optim::MuonOptions& options, bool allow_tf32) : muon_(options, allow_tf32) {}
  void step(const optim::OptimParam& p, float* momentum, double lr, double weight_decay,
            double momentum_factor) override {
    MuonDeviceParam d;
    d.rows = p.shape[0];
    d.cols = p.shape[1];
    d.param = p.main_param;
    d.grad = p.grad;
    d.momentum = momentum;
    d.qkv_split = p.qkv_split;
    muon_.step(d, lr, weight_decay, momentum_factor);
  }

 private:
  MuonCuda muon_;
};

}  // namespace

DeviceShardMath::DeviceShardMath(int device, bool allow_tf32)
    : device_(device), allow_tf32_(allow_tf32) {
  use_device(device);
}

double DeviceShardMath::sum_of_squares(const float* values, std::int64_t n) const {
  const DeviceSpan span{const_cast<float*>(values), n};
  return stats_.sum_of_squares({&span, 1});
}

std::int64_t DeviceShardMath::count_zeros(const float* values, std::int64_t n) const {
  const DeviceSpan span{const_cast<float*>(values), n};
  return stats_.count_zeros({&span, 1});
}

void DeviceShardMath::scale(float* values, std::int64_t n, float coeff) const {
  const DeviceSpan span{values, n};
  stats_.scale({&span, 1}, coeff);
}

optim::FloatArray DeviceShardMath::zeros(std::int64_t n) const {
  const auto nbytes = static_cast<std::size_t>(n) * sizeof(float);
  std::shared_ptr<std::byte> bytes = device_bytes(nbytes);
  check_cuda(cudaMemset(bytes.get(), 0, nbytes), "cudaMemset");
  return {std::shared_ptr<float>(bytes, reinterpret_cast<float*>(bytes.get())), n};
}

optim::FloatArray DeviceShardMath::adopt(std::vector<float>&& values) const {
  const auto n = static_cast<std::int64_t>(values.size());
  optim::FloatArray array = zeros(n);
  copy_to_device(array.data(), values.data(), values.size() * sizeof(float));
  return array;
}

std::vector<float> DeviceShardMath::to_host(const float* values, std::int64_t n) const {
  std::vector<float> out(static_cast<std::size_t>(n));
  copy_to_host(out.data(), values, out.size() * sizeof(float));
  return out;
}

std::span<const float> DeviceShardMath::view_values(const optim::FloatArray& array,
                                                    optim::OptimizerStateView& view) const {
  return view.hold(to_host(array.data(), array.size()));
}

void DeviceShardMath::widen(const TensorView& model, float* main) const {
  require_device_view(model, device_, "DeviceShardMath::widen");
  widen_to_main_device(model, main);
}

void DeviceShardMath::narrow(const float* main, const TensorView& model) const {
  require_device_view(model, device_, "DeviceShardMath::narrow");
  narrow_from_main_device(main, model);
}

void DeviceShardMath::adamw_update(const optim::AdamWStepScalars& scalars, float* param,
                                   const float* grad, float* exp_avg, float* exp_avg_sq,
                                   std::int64_t n) const {
  AdamWDeviceTensors t;
  t.numel = n;
  t.param = param;
  t.grad = grad;
  t.exp_avg = exp_avg;
  t.exp_avg_sq = exp_avg_sq;
  adamw_update_device(scalars, t);
}

std::unique_ptr<optim::MuonMatrixStep> DeviceShardMath::make_muon_step(
    const optim::MuonOptions& options) const {
  return std::make_unique<DeviceMuonStep>(options, allow_tf32_);
}

}  // namespace shardwise::cuda
