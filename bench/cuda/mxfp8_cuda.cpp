// MXFP8 quantize / dequantize on the GPU next to a device-to-device copy measured in the same
// run (the GPU's memory limit). Traffic = bytes read + bytes written, as STREAM counts a copy
// (MXFP8 = data + one scale byte per 32 elements). Each kernel runs twice: vectorised (whole
// blocks, aligned pointers: what callers normally get) and general (the same tensor one element
// off 16-byte alignment, which forces the one-element-per-thread kernels).
// Prints the figures in the form of bench/machine_limits.hpp:
//   bench: <figure-name> ours=<value> limit=<value> unit=GB/s ratio=<ours/limit>
// Usage: bench_mxfp8_cuda [rows=8192] [cols=8192] [iters=20]; exits 0 without a GPU (prints why).
#include "shardwise/cuda/mxfp8_cuda.hpp"

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>

namespace {

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    std::fprintf(stderr, "bench_mxfp8_cuda: %s failed: %s\n", what, cudaGetErrorString(status));
    std::exit(1);
  }
}

// Mean seconds per call of `body` over `iters` calls after two warm-up calls, by CUDA events.
double time_gpu(int iters, const std::function<void()>& body) {
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  body();
  body();
  check(cudaEventRecord(start), "cudaEventRecord");
  for (int i = 0; i < iters; ++i) body();
  check(cudaEventRecord(stop), "cudaEventRecord");
  check(cudaEventSynchronize(stop), "cudaEventSynchronize");
  float ms = 0.0f;
  check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return static_cast<double>(ms) * 1e-3 / iters;
}

void print_figure(const std::string& name, double ours, double limit) {
  std::printf("bench: %s ours=%.2f limit=%.2f unit=GB/s ratio=%.3f\n", name.c_str(), ours, limit,
              ours / limit);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace shardwise;
  const std::int64_t rows = argc > 1 ? std::atoll(argv[1]) : 8192;
  const std::int64_t cols = argc > 2 ? std::atoll(argv[2]) : 8192;
  const int iters = argc > 3 ? std::atoi(argv[3]) : 20;
  if (!cuda::gpu_available()) {
    std::printf("bench_mxfp8_cuda: no CUDA device, nothing measured\n");
    return 0;
  }
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  const std::int64_t n = rows * cols;
  const double mx_bytes = static_cast<double>(n) + static_cast<double>(n / 32);
  std::printf("device: %s, tensor [%lld, %lld], %d iterations\n", prop.name,
              static_cast<long long>(rows), static_cast<long long>(cols), iters);

  // One input buffer with 16 spare bytes so the same tensor can also sit one element further on.
  void *wide = nullptr, *copy = nullptr;
  std::uint8_t *data = nullptr, *scale = nullptr;
  check(cudaMalloc(&wide, static_cast<std::size_t>(n) * 4 + 16), "cudaMalloc");
  check(cudaMalloc(&copy, static_cast<std::size_t>(n) * 4 + 16), "cudaMalloc");
  check(cudaMalloc(&data, static_cast<std::size_t>(n) + 16), "cudaMalloc");
  // Room for either scale layout (the swizzled one pads rows to 128 and block columns to 4).
  const auto scale_bytes = static_cast<std::size_t>(
      mxfp8_geometry(rows, cols, Mxfp8ScaleLayout::kSwizzled128x4).scale_bytes + 16);
  check(cudaMalloc(&scale, scale_bytes), "cudaMalloc");
  // bf16 0x3f80 / fp32 bit patterns of ordinary magnitudes: a byte pattern of 0x3c gives both.
  check(cudaMemset(wide, 0x3c, static_cast<std::size_t>(n) * 4 + 16), "cudaMemset");
  check(cudaMemset(data, 0x3c, static_cast<std::size_t>(n) + 16), "cudaMemset");
  check(cudaMemset(scale, 127, scale_bytes), "cudaMemset");

  auto copy_gbs = [&](std::size_t bytes) {
    const double s = time_gpu(iters, [&] {
      check(cudaMemcpyAsync(copy, wide, bytes, cudaMemcpyDeviceToDevice), "cudaMemcpyAsync");
    });
    return 2.0 * static_cast<double>(bytes) / s * 1e-9;
  };
  const double limit = copy_gbs(static_cast<std::size_t>(n) * 2);
  std::printf("device-to-device copy of the bf16 tensor: %.1f GB/s (read + write)\n", limit);

  struct Case {
    const char* figure;
    DType dtype;
    bool quantize;
    Mxfp8ScaleLayout layout = Mxfp8ScaleLayout::kRowMajor;
    Mxfp8ScaleRule rule = Mxfp8ScaleRule::kCeil;
  };
  constexpr auto kSwizzled = Mxfp8ScaleLayout::kSwizzled128x4;
  for (const Case c :
       {Case{"mxfp8_quantize_bf16_cuda", DType::kBFloat16, true},
        Case{"mxfp8_dequantize_bf16_cuda", DType::kBFloat16, false},
        Case{"mxfp8_quantize_fp32_cuda", DType::kFloat32, true},
        Case{"mxfp8_dequantize_fp32_cuda", DType::kFloat32, false},
        Case{"mxfp8_quantize_fp16_cuda", DType::kFloat16, true},
        Case{"mxfp8_dequantize_fp16_cuda", DType::kFloat16, false},
        Case{"mxfp8_quantize_bf16_swizzled_cuda", DType::kBFloat16, true, kSwizzled},
        Case{"mxfp8_dequantize_bf16_swizzled_cuda", DType::kBFloat16, false, kSwizzled},
        Case{"mxfp8_quantize_bf16_floor_cuda", DType::kBFloat16, true, Mxfp8ScaleLayout::kRowMajor,
             Mxfp8ScaleRule::kFloor}}) {
    const double traffic =
        static_cast<double>(n) * static_cast<double>(dtype_size(c.dtype)) + mx_bytes;
    auto run = [&](void* tensor) {
      return time_gpu(iters, [&] {
        if (c.quantize) {
          cuda::quantize_mxfp8_device(tensor, c.dtype, rows, cols, data, scale, nullptr,
                                      {c.rule, c.layout, 0});
        } else {
          cuda::dequantize_mxfp8_device(data, scale, rows, cols, tensor, c.dtype, nullptr,
                                        c.layout);
        }
      });
    };
    const double vectorised = traffic / run(wide) * 1e-9;
    const double general =
        traffic / run(static_cast<std::uint8_t*>(wide) + dtype_size(c.dtype)) * 1e-9;
    std::printf("  %-36s vectorised %8.1f GB/s   general kernel %8.1f GB/s\n", c.figure, vectorised,
                general);
    print_figure(c.figure, vectorised, limit);
  }
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  cudaFree(wide);
  cudaFree(copy);
  cudaFree(data);
  cudaFree(scale);
  return 0;
}
