// The fused AdamW kernel next to a device-to-device copy measured in the same run (the GPU's
// memory limit). Traffic per element = bytes read + bytes written: param, exp_avg, exp_avg_sq
// (fp32, read and written: 24 bytes), the grad (read) and the model-param copy (written), as
// STREAM counts a copy (read + write). Prints
//   bench: adamw_cuda_<grad>_<model> ours=<GB/s> limit=<GB/s> unit=GB/s ratio=<ours/limit>
// and the bf16 / fp16 param buffers' step as the device optimizers run it (DeviceShardMath: the
// AdamW kernel on the fp32 main params, then the rounding pass into the 16-bit buffer), counted
// with the fused step's bytes (fp32 grad read, 16-bit param written) so its ratio shows what the
// second pass costs:
//   bench: adamw_cuda_fp32_grad_<bf16|fp16>_params_two_pass ...
// Usage: bench_adamw_cuda [numel=67108864] [iters=20]; exits 0 without a GPU (prints why).
#include "shardwise/cuda/adamw_cuda.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "cuda_bench_support.hpp"
#include "shardwise/core/dtype.hpp"
#include "shardwise/cuda/device_buffer.hpp"
#include "shardwise/cuda/mixed_precision_cuda.hpp"
#include "shardwise/cuda/mxfp8_cuda.hpp"

namespace {

using shardwise::DType;
using shardwise::cuda::DeviceBuffer;
using shardwise::cuda::bench::check;
using shardwise::cuda::bench::print_figure;
using shardwise::cuda::bench::time_gpu;

struct Case {
  DType grad;
  bool model_copy;
  DType model = DType::kBFloat16;
};

// Buffers for the widest case (fp32 grads and model copy), filled with ordinary fp32 / bf16
// values (byte pattern 0x3c: 0.0115 as fp32, 0.0114 as bf16), reused by every case.
struct Buffers {
  DeviceBuffer param, grad, exp_avg, exp_avg_sq, model;
  explicit Buffers(std::int64_t n) {
    const auto bytes = static_cast<std::size_t>(n) * 4;
    for (DeviceBuffer* b : {&param, &grad, &exp_avg, &exp_avg_sq, &model}) {
      b->reserve(bytes);
      check(cudaMemset(b->data(), 0x3c, bytes), "cudaMemset");
    }
  }
};

double copy_gbs(const Buffers& b, std::int64_t n, int iters) {
  const auto bytes = static_cast<std::size_t>(n) * 4;
  const double s = time_gpu(iters, [&] {
    check(cudaMemcpyAsync(b.model.data(), b.param.data(), bytes, cudaMemcpyDeviceToDevice),
          "cudaMemcpyAsync");
  });
  return 2.0 * static_cast<double>(bytes) / s * 1e-9;
}

void measure(const Case& c, Buffers& b, std::int64_t n, int iters, double limit) {
  shardwise::cuda::AdamWDeviceTensors t;
  t.numel = n;
  t.param = b.param.as<float>();
  t.grad = b.grad.data();
  t.grad_dtype = c.grad;
  t.exp_avg = b.exp_avg.as<float>();
  t.exp_avg_sq = b.exp_avg_sq.as<float>();
  t.model_param = c.model_copy ? b.model.data() : nullptr;
  t.model_dtype = c.model;
  // Step 1000: bias corrections near 1, as in a long run; the kernel's cost does not depend on it.
  const auto scalars = shardwise::optim::AdamWStepScalars::make(1e-4, 0.1, 0.9, 0.95, 1e-8, 1000);
  const double s = time_gpu(iters, [&] { shardwise::cuda::adamw_update_device(scalars, t); });
  const double per_element =
      24.0 + static_cast<double>(shardwise::dtype_size(c.grad)) +
      (c.model_copy ? static_cast<double>(shardwise::dtype_size(c.model)) : 0.0);
  const double gbs = per_element * static_cast<double>(n) / s * 1e-9;
  const std::string name =
      std::string("adamw_cuda_") + std::string(shardwise::dtype_name(c.grad)) + "_grad_" +
      (c.model_copy ? std::string(shardwise::dtype_name(c.model)) : "no") + "_copy";
  std::printf("  %-40s %8.1f GB/s  (%.3f ms per step of %lld elements)\n", name.c_str(), gbs,
              s * 1e3, static_cast<long long>(n));
  print_figure(name, gbs, limit, "GB/s");
}

// AdamW on fp32 main params, then the main params rounded into the `model` buffer: what the
// distributed optimizers run per step for 16-bit param buffers on the device.
void measure_two_pass(DType model, Buffers& b, std::int64_t n, int iters, double limit) {
  shardwise::cuda::AdamWDeviceTensors t;
  t.numel = n;
  t.param = b.param.as<float>();
  t.grad = b.grad.data();
  t.exp_avg = b.exp_avg.as<float>();
  t.exp_avg_sq = b.exp_avg_sq.as<float>();
  const shardwise::TensorView model_view{b.model.data(), n, model, 0};
  const auto scalars = shardwise::optim::AdamWStepScalars::make(1e-4, 0.1, 0.9, 0.95, 1e-8, 1000);
  const double s = time_gpu(iters, [&] {
    shardwise::cuda::adamw_update_device(scalars, t);
    shardwise::cuda::narrow_from_main_device(t.param, model_view);
  });
  const double per_element = 24.0 + 4.0 + static_cast<double>(shardwise::dtype_size(model));
  const double gbs = per_element * static_cast<double>(n) / s * 1e-9;
  const std::string name = std::string("adamw_cuda_fp32_grad_") +
                           std::string(shardwise::dtype_name(model)) + "_params_two_pass";
  std::printf("  %-40s %8.1f GB/s  (%.3f ms per step of %lld elements)\n", name.c_str(), gbs,
              s * 1e3, static_cast<long long>(n));
  print_figure(name, gbs, limit, "GB/s");
}

void run(std::int64_t n, int iters) {
  Buffers buffers(n);
  const double limit = copy_gbs(buffers, n, iters);
  std::printf("device-to-device copy of %lld fp32: %.1f GB/s (read + write)\n",
              static_cast<long long>(n), limit);
  for (const Case& c :
       {Case{DType::kFloat32, false}, Case{DType::kBFloat16, true},
        Case{DType::kFloat16, true, DType::kFloat16}, Case{DType::kFloat32, true, DType::kBFloat16},
        Case{DType::kFloat32, true, DType::kFloat16}}) {
    measure(c, buffers, n, iters, limit);
  }
  // On device 0, where the buffers are (time_gpu runs on the current device).
  for (DType model : {DType::kBFloat16, DType::kFloat16})
    measure_two_pass(model, buffers, n, iters, limit);
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}

}  // namespace

int main(int argc, char** argv) {
  const std::int64_t n = argc > 1 ? std::atoll(argv[1]) : (std::int64_t{1} << 26);
  const int iters = argc > 2 ? std::atoi(argv[2]) : 20;
  if (!shardwise::cuda::gpu_available()) {
    std::printf("bench_adamw_cuda: no CUDA device, nothing measured\n");
    return 0;
  }
  try {
    shardwise::cuda::bench::print_device();
    run(n, iters);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_adamw_cuda: %s\n", e.what());
    return 1;
  }
  return 0;
}
