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

#include "cuda_bench_support.hpp"

namespace {

using shardwise::cuda::bench::check;
using shardwise::cuda::bench::time_gpu;

void print_figure(const std::string& name, double ours, double limit) {
  shardwise::cuda::bench::print_figure(name, ours, limit, "GB/s");
}

using shardwise::DType;
using shardwise::Mxfp8ScaleLayout;
using shardwise::Mxfp8ScaleRule;

struct Shape {
  std::int64_t rows, cols;
  std::int64_t numel() const { return rows * cols; }
};

// The device buffers every case works in, freed on scope exit. `wide` (an fp32/bf16/fp16 tensor)
// has 16 spare bytes so the same tensor can also sit one element further on.
struct DeviceBuffers {
  void* wide = nullptr;
  void* copy = nullptr;
  std::uint8_t* data = nullptr;
  std::uint8_t* scale = nullptr;

  explicit DeviceBuffers(Shape shape) {
    const auto n = static_cast<std::size_t>(shape.numel());
    // Room for either scale layout (the swizzled one pads rows to 128 and block columns to 4).
    const auto scale_bytes = static_cast<std::size_t>(
        shardwise::mxfp8_geometry(shape.rows, shape.cols, Mxfp8ScaleLayout::kSwizzled128x4)
            .scale_bytes +
        16);
    check(cudaMalloc(&wide, n * 4 + 16), "cudaMalloc");
    check(cudaMalloc(&copy, n * 4 + 16), "cudaMalloc");
    check(cudaMalloc(&data, n + 16), "cudaMalloc");
    check(cudaMalloc(&scale, scale_bytes), "cudaMalloc");
    // bf16 0x3f80 / fp32 bit patterns of ordinary magnitudes: a byte pattern of 0x3c gives both.
    check(cudaMemset(wide, 0x3c, n * 4 + 16), "cudaMemset");
    check(cudaMemset(data, 0x3c, n + 16), "cudaMemset");
    check(cudaMemset(scale, 127, scale_bytes), "cudaMemset");
  }
  ~DeviceBuffers() {
    cudaFree(wide);
    cudaFree(copy);
    cudaFree(data);
    cudaFree(scale);
  }
  DeviceBuffers(const DeviceBuffers&) = delete;
  DeviceBuffers& operator=(const DeviceBuffers&) = delete;
};

// The limit: a device-to-device copy of the bf16 tensor, bytes read + written per second.
double copy_gbs(const DeviceBuffers& b, Shape shape, int iters) {
  const auto bytes = static_cast<std::size_t>(shape.numel()) * 2;
  const double s = time_gpu(iters, [&] {
    check(cudaMemcpyAsync(b.copy, b.wide, bytes, cudaMemcpyDeviceToDevice), "cudaMemcpyAsync");
  });
  return 2.0 * static_cast<double>(bytes) / s * 1e-9;
}

struct Case {
  const char* figure;
  DType dtype;
  bool quantize;
  Mxfp8ScaleLayout layout = Mxfp8ScaleLayout::kRowMajor;
  Mxfp8ScaleRule rule = Mxfp8ScaleRule::kCeil;
};

// Times one case on the aligned tensor (vectorised kernels) and one element further on (general
// kernels), prints both and the bench: line of the first.
void measure(const Case& c, const DeviceBuffers& b, Shape shape, int iters, double limit) {
  const double n = static_cast<double>(shape.numel());
  const double traffic = n * static_cast<double>(shardwise::dtype_size(c.dtype)) + n + n / 32;
  auto gbs = [&](void* tensor) {
    const double s = time_gpu(iters, [&] {
      if (c.quantize) {
        shardwise::cuda::quantize_mxfp8_device(tensor, c.dtype, shape.rows, shape.cols, b.data,
                                               b.scale, nullptr, {c.rule, c.layout, 0});
      } else {
        shardwise::cuda::dequantize_mxfp8_device(b.data, b.scale, shape.rows, shape.cols, tensor,
                                                 c.dtype, nullptr, c.layout);
      }
    });
    return traffic / s * 1e-9;
  };
  const double vectorised = gbs(b.wide);
  const double general = gbs(static_cast<std::uint8_t*>(b.wide) + shardwise::dtype_size(c.dtype));
  std::printf("  %-36s vectorised %8.1f GB/s   general kernel %8.1f GB/s\n", c.figure, vectorised,
              general);
  print_figure(c.figure, vectorised, limit);
}

}  // namespace

int main(int argc, char** argv) {
  const Shape shape{argc > 1 ? std::atoll(argv[1]) : 8192, argc > 2 ? std::atoll(argv[2]) : 8192};
  const int iters = argc > 3 ? std::atoi(argv[3]) : 20;
  if (!shardwise::cuda::gpu_available()) {
    std::printf("bench_mxfp8_cuda: no CUDA device, nothing measured\n");
    return 0;
  }
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  std::printf("device: %s, tensor [%lld, %lld], %d iterations\n", prop.name,
              static_cast<long long>(shape.rows), static_cast<long long>(shape.cols), iters);
  const DeviceBuffers buffers(shape);
  const double limit = copy_gbs(buffers, shape, iters);
  std::printf("device-to-device copy of the bf16 tensor: %.1f GB/s (read + write)\n", limit);
  constexpr auto kSwizzled = Mxfp8ScaleLayout::kSwizzled128x4;
  for (const Case& c :
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
    measure(c, buffers, shape, iters, limit);
  }
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  return 0;
}
