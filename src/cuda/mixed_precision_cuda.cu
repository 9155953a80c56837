// Element-wise fp32 <-> bf16 / fp16 conversion kernels (float_bits.cuh: the CPU converters'
// bits), one element per thread in a grid-stride loop: a memory-bound pass over the owned shard
// after each optimizer step.
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda_status.hpp"
#include "float_bits.cuh"
#include "shardwise/core/error.hpp"
#include "shardwise/cuda/mixed_precision_cuda.hpp"

namespace shardwise::cuda {
namespace {

constexpr int kThreads = 256;
constexpr std::int64_t kMaxBlocks = 1 << 16;

unsigned blocks_for(std::int64_t n) {
  const std::int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

__global__ void widen_bf16_kernel(const std::uint16_t* model, float* main, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x)
    main[i] = detail::bf16_bits_to_float(model[i]);
}

__global__ void widen_fp16_kernel(const std::uint16_t* model, float* main, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x)
    main[i] = detail::fp16_bits_to_float(model[i]);
}

__global__ void narrow_bf16_kernel(const float* main, std::uint16_t* model, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x)
    model[i] = detail::float_to_bf16_bits(main[i]);
}

__global__ void narrow_fp16_kernel(const float* main, std::uint16_t* model, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x)
    model[i] = detail::float_to_fp16_bits(main[i]);
}

void require_device_model(const TensorView& model, const char* what) {
  SW_REQUIRE(model.on_device(), InvalidArgument, what,
             ": the model view is in host memory, expected a CUDA device view");
  SW_REQUIRE(model.dtype == DType::kBFloat16 || model.dtype == DType::kFloat16 ||
                 model.dtype == DType::kFloat32,
             InvalidArgument, what, ": model params must be bf16, fp16 or fp32, not ",
             dtype_name(model.dtype));
}

}  // namespace

void widen_to_main_device(const TensorView& model, float* main) {
  require_device_model(model, "widen_to_main_device");
  const std::int64_t n = model.numel;
  if (n == 0) return;
  const auto* bits = static_cast<const std::uint16_t*>(model.data);
  switch (model.dtype) {
    case DType::kBFloat16:
      widen_bf16_kernel<<<blocks_for(n), kThreads>>>(bits, main, n);
      break;
    case DType::kFloat16:
      widen_fp16_kernel<<<blocks_for(n), kThreads>>>(bits, main, n);
      break;
    default:
      detail::check_cuda(cudaMemcpy(main, model.data, model.nbytes(), cudaMemcpyDeviceToDevice),
                         "cudaMemcpy of fp32 model params");
      return;
  }
  detail::check_launch("widen_to_main_device launch");
}

void narrow_from_main_device(const float* main, const TensorView& model) {
  require_device_model(model, "narrow_from_main_device");
  const std::int64_t n = model.numel;
  if (n == 0) return;
  auto* bits = static_cast<std::uint16_t*>(model.data);
  switch (model.dtype) {
    case DType::kBFloat16:
      narrow_bf16_kernel<<<blocks_for(n), kThreads>>>(main, bits, n);
      break;
    case DType::kFloat16:
      narrow_fp16_kernel<<<blocks_for(n), kThreads>>>(main, bits, n);
      break;
    default:
      detail::check_cuda(cudaMemcpy(model.data, main, model.nbytes(), cudaMemcpyDeviceToDevice),
                         "cudaMemcpy of fp32 main params");
      return;
  }
  detail::check_launch("narrow_from_main_device launch");
}

}  // namespace shardwise::cuda
