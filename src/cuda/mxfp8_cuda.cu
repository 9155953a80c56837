// MXFP8 kernels for NVIDIA GPUs. Quantize: one warp per block of 32 elements (lane i holds
// element i; the block amax is one warp max-reduction), so a warp reads 32 consecutive inputs and
// writes 32 consecutive E4M3 bytes. Dequantize: one thread per element.
//
// Bit-exactness with the CPU codec (core/fp8.hpp, src/core/mxfp8_kernels.cpp) comes from using
// the same integer arithmetic for every conversion and IEEE round-to-nearest-even intrinsics
// (__fmul_rn / __fadd_rn, no flush-to-zero) for the few float operations, instead of the
// hardware cvt to e4m3, whose NaN/Inf handling differs from ours.
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "shardwise/cuda/mxfp8_cuda.hpp"

namespace shardwise::cuda {
namespace {

constexpr int kBlock = 32;
constexpr int kWarpsPerCta = 8;
constexpr int kThreadsPerCta = kBlock * kWarpsPerCta;
constexpr std::int64_t kMaxCtas = 1 << 16;  // grid-stride loops cover the rest

constexpr std::uint32_t kAbsMask = 0x7fffffffu;
constexpr std::uint32_t kInfBits = 0x7f800000u;
constexpr std::uint32_t kBitsOf448 = 0x43e00000u;
constexpr std::uint32_t kBitsOfMinNormal = 0x3c800000u;       // 2^-6, smallest E4M3 normal
constexpr std::uint32_t kBitsOfSubnormalMagic = 0x46800000u;  // 2^14
constexpr std::uint32_t kRebias = (127u - 7u) << 23;

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    throw CudaError(
        str_cat(what, " failed: ", cudaGetErrorName(status), ": ", cudaGetErrorString(status)));
  }
}

// --- element conversions (device copies of the CPU formulas) ---------------------------------

struct Bf16Input {
  const std::uint16_t* p;
  __device__ float operator()(std::int64_t i) const {
    return __uint_as_float(static_cast<std::uint32_t>(p[i]) << 16);
  }
};

struct F16Input {
  const std::uint16_t* p;
  __device__ float operator()(std::int64_t i) const {
    const std::uint32_t h = p[i];
    const std::uint32_t sign = (h & 0x8000u) << 16;
    const std::uint32_t exponent = h & 0x7c00u;
    const std::uint32_t normal = ((h & 0x7fffu) << 13) + (112u << 23);
    const std::uint32_t inf_nan = normal + (112u << 23);
    const float sub = __fmul_rn(static_cast<float>(h & 0x3ffu), 5.9604644775390625e-08f);
    std::uint32_t bits = exponent == 0x7c00u ? inf_nan : normal;
    bits = exponent == 0 ? __float_as_uint(sub) : bits;
    return __uint_as_float(sign | bits);
  }
};

struct F32Input {
  const float* p;
  __device__ float operator()(std::int64_t i) const { return p[i]; }
};

// Magnitude bits (finite or Inf, not NaN) -> E4M3 magnitude code, RNE, saturating at 448.
__device__ __forceinline__ std::uint32_t encode_e4m3_magnitude(std::uint32_t abs) {
  const std::uint32_t sat = abs < kBitsOf448 ? abs : kBitsOf448;
  const std::uint32_t rounded = sat + 0x7ffffu + ((sat >> 20) & 1u);
  const std::uint32_t normal = (rounded - kRebias) >> 20;
  const float sum = __fadd_rn(__uint_as_float(sat), 16384.0f);
  const std::uint32_t subnormal = __float_as_uint(sum) - kBitsOfSubnormalMagic;
  return sat < kBitsOfMinNormal ? subnormal : normal;
}

__device__ __forceinline__ float e4m3_to_float(std::uint32_t code) {
  const std::uint32_t sign = (code & 0x80u) << 24;
  const std::uint32_t abs = code & 0x7fu;
  const std::uint32_t normal = (abs << 20) + kRebias;
  const float subnormal = __fmul_rn(static_cast<float>(abs & 7u), 0.001953125f);
  std::uint32_t bits = abs < 8u ? __float_as_uint(subnormal) : normal;
  bits = abs == 0x7fu ? 0x7fc00000u : bits;
  return __uint_as_float(sign | bits);
}

__device__ __forceinline__ float e8m0_to_float(std::uint32_t e) {
  std::uint32_t bits = e << 23;
  bits = e == 0 ? 0x00400000u : bits;
  bits = e == 0xffu ? 0x7fc00000u : bits;
  return __uint_as_float(bits);
}

__device__ __forceinline__ std::uint16_t float_to_bf16(float f) {
  const std::uint32_t u = __float_as_uint(f);
  if ((u & kAbsMask) > kInfBits) return static_cast<std::uint16_t>((u >> 16) | 0x40u);
  return static_cast<std::uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

__device__ __forceinline__ std::uint16_t float_to_fp16(float f) {
  const std::uint32_t u = __float_as_uint(f);
  const std::uint32_t sign = (u >> 16) & 0x8000u;
  const std::uint32_t abs = u & kAbsMask;
  if (abs > kInfBits) return static_cast<std::uint16_t>(sign | 0x7e00u);
  if (abs >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);
  if (abs < 0x38800000u) {
    const float scaled = __fmul_rn(__uint_as_float(abs), 16777216.0f);
    const float rounded = __fsub_rn(__fadd_rn(scaled, 8388608.0f), 8388608.0f);
    return static_cast<std::uint16_t>(sign | static_cast<std::uint32_t>(rounded));
  }
  std::uint32_t v = abs - (112u << 23);
  v += 0xfffu + ((v >> 13) & 1u);
  return static_cast<std::uint16_t>(sign | (v >> 13));
}

// --- kernels ------------------------------------------------------------------------------------

template <typename Input>
__global__ void quantize_kernel(Input input, std::int64_t rows, std::int64_t cols,
                                std::int64_t blocks_per_row, std::uint8_t* __restrict__ data,
                                std::uint8_t* __restrict__ scale) {
  const int lane = static_cast<int>(threadIdx.x) % kBlock;
  const std::int64_t warp =
      (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kBlock;
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * blockDim.x / kBlock;
  const std::int64_t total = rows * blocks_per_row;
  // Every lane of a warp walks the same blocks, so the full-mask reduction below is uniform.
  for (std::int64_t block = warp; block < total; block += warps) {
    const std::int64_t row = block / blocks_per_row;
    const std::int64_t col = (block % blocks_per_row) * kBlock + lane;
    const bool valid = col < cols;
    const std::int64_t index = row * cols + col;
    const std::uint32_t u = valid ? __float_as_uint(input(index)) : 0u;
    const std::uint32_t abs = u & kAbsMask;
    // Ceil rule: NaN/Inf are left out of amax; missing lanes of a partial block count as 0.
    const std::uint32_t amax = __reduce_max_sync(0xffffffffu, abs < kInfBits ? abs : 0u);
    // Smallest 2^e with amax <= 448 * 2^e (see scale_biased_exponent in mxfp8_kernels.cpp).
    int biased = static_cast<int>(amax >> 23) - 8 + ((amax & 0x7fffffu) > 0x600000u ? 1 : 0);
    biased = biased < 0 ? 0 : (biased > 254 ? 254 : biased);
    const float inverse_scale = __uint_as_float((254u - static_cast<std::uint32_t>(biased)) << 23);
    const std::uint32_t scaled = __float_as_uint(__fmul_rn(__uint_as_float(abs), inverse_scale));
    std::uint32_t magnitude = encode_e4m3_magnitude(scaled);
    magnitude = abs >= kInfBits ? 0x7fu : magnitude;
    if (valid) data[index] = static_cast<std::uint8_t>(((u >> 24) & 0x80u) | magnitude);
    if (lane == 0) scale[block] = static_cast<std::uint8_t>(biased);
  }
}

struct F32Output {
  float* p;
  __device__ void operator()(std::int64_t i, float v) const { p[i] = v; }
};
struct Bf16Output {
  std::uint16_t* p;
  __device__ void operator()(std::int64_t i, float v) const { p[i] = float_to_bf16(v); }
};
struct F16Output {
  std::uint16_t* p;
  __device__ void operator()(std::int64_t i, float v) const { p[i] = float_to_fp16(v); }
};

template <typename Output>
__global__ void dequantize_kernel(const std::uint8_t* __restrict__ data,
                                  const std::uint8_t* __restrict__ scale, std::int64_t rows,
                                  std::int64_t cols, std::int64_t blocks_per_row, Output output) {
  const std::int64_t n = rows * cols;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const std::int64_t row = i / cols;
    const std::int64_t block = (i % cols) / kBlock;
    const std::uint32_t code = data[i];
    const std::uint32_t e = scale[row * blocks_per_row + block];
    float v = __fmul_rn(e4m3_to_float(code), e8m0_to_float(e));
    // GPU arithmetic returns one canonical NaN; the CPU keeps the NaN operand (with its sign).
    if (e == 0xffu) v = __uint_as_float(0x7fc00000u);
    if ((code & 0x7fu) == 0x7fu) v = __uint_as_float(((code & 0x80u) << 24) | 0x7fc00000u);
    output(i, v);
  }
}

unsigned ctas_for(std::int64_t threads) {
  const std::int64_t ctas = (threads + kThreadsPerCta - 1) / kThreadsPerCta;
  return static_cast<unsigned>(ctas < 1 ? 1 : (ctas > kMaxCtas ? kMaxCtas : ctas));
}

void check_dtype(DType dtype, const char* what) {
  SW_REQUIRE(dtype == DType::kFloat32 || dtype == DType::kBFloat16 || dtype == DType::kFloat16,
             InvalidArgument, what, ": dtype ", dtype_name(dtype),
             " is not supported (expected fp32, bf16 or fp16)");
}

void check_shape(std::int64_t rows, std::int64_t cols, const char* what) {
  SW_REQUIRE(rows >= 0 && cols >= 0, ShapeError, what, ": negative shape [", rows, ", ", cols, "]");
}

// Device memory freed on scope exit.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t bytes) {
    if (bytes > 0) check(cudaMalloc(&ptr_, bytes), "cudaMalloc");
  }
  ~DeviceBuffer() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return ptr_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }

 private:
  void* ptr_ = nullptr;
};

void require_gpu() { SW_REQUIRE(device_count() > 0, CudaError, "no CUDA device is available"); }

}  // namespace

int device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" / "no driver" error
    return 0;
  }
  return count;
}

void quantize_mxfp8_device(const void* input, DType dtype, std::int64_t rows, std::int64_t cols,
                           std::uint8_t* data, std::uint8_t* scale, void* stream) {
  check_dtype(dtype, "quantize_mxfp8_device input");
  check_shape(rows, cols, "quantize_mxfp8_device");
  const std::int64_t blocks_per_row = (cols + kBlock - 1) / kBlock;
  if (rows == 0 || cols == 0) return;
  const unsigned grid = ctas_for(rows * blocks_per_row * kBlock);
  auto s = static_cast<cudaStream_t>(stream);
  switch (dtype) {
    case DType::kFloat32:
      quantize_kernel<<<grid, kThreadsPerCta, 0, s>>>(F32Input{static_cast<const float*>(input)},
                                                      rows, cols, blocks_per_row, data, scale);
      break;
    case DType::kBFloat16:
      quantize_kernel<<<grid, kThreadsPerCta, 0, s>>>(
          Bf16Input{static_cast<const std::uint16_t*>(input)}, rows, cols, blocks_per_row, data,
          scale);
      break;
    default:
      quantize_kernel<<<grid, kThreadsPerCta, 0, s>>>(
          F16Input{static_cast<const std::uint16_t*>(input)}, rows, cols, blocks_per_row, data,
          scale);
      break;
  }
  check(cudaGetLastError(), "quantize_mxfp8 kernel launch");
}

void dequantize_mxfp8_device(const std::uint8_t* data, const std::uint8_t* scale, std::int64_t rows,
                             std::int64_t cols, void* output, DType dtype, void* stream) {
  check_dtype(dtype, "dequantize_mxfp8_device output");
  check_shape(rows, cols, "dequantize_mxfp8_device");
  const std::int64_t blocks_per_row = (cols + kBlock - 1) / kBlock;
  if (rows == 0 || cols == 0) return;
  const unsigned grid = ctas_for(rows * cols);
  auto s = static_cast<cudaStream_t>(stream);
  switch (dtype) {
    case DType::kFloat32:
      dequantize_kernel<<<grid, kThreadsPerCta, 0, s>>>(data, scale, rows, cols, blocks_per_row,
                                                        F32Output{static_cast<float*>(output)});
      break;
    case DType::kBFloat16:
      dequantize_kernel<<<grid, kThreadsPerCta, 0, s>>>(
          data, scale, rows, cols, blocks_per_row, Bf16Output{static_cast<std::uint16_t*>(output)});
      break;
    default:
      dequantize_kernel<<<grid, kThreadsPerCta, 0, s>>>(
          data, scale, rows, cols, blocks_per_row, F16Output{static_cast<std::uint16_t*>(output)});
      break;
  }
  check(cudaGetLastError(), "dequantize_mxfp8 kernel launch");
}

Mxfp8Tensor quantize_mxfp8_cuda(TensorView input, std::int64_t rows, std::int64_t cols) {
  check_dtype(input.dtype, "quantize_mxfp8_cuda input");
  check_shape(rows, cols, "quantize_mxfp8_cuda");
  SW_REQUIRE(input.numel == rows * cols, ShapeError, "quantize_mxfp8_cuda: input has ", input.numel,
             " elements, shape [", rows, ", ", cols, "] needs ", rows * cols);
  Mxfp8Tensor out = Mxfp8Tensor::allocate(rows, cols, Mxfp8ScaleLayout::kRowMajor);
  if (input.numel == 0) return out;
  require_gpu();
  DeviceBuffer d_in(input.nbytes()), d_data(out.data.size()), d_scale(out.scale.size());
  check(cudaMemcpy(d_in.get(), input.data, input.nbytes(), cudaMemcpyHostToDevice),
        "cudaMemcpy (input to device)");
  quantize_mxfp8_device(d_in.get(), input.dtype, rows, cols, d_data.as<std::uint8_t>(),
                        d_scale.as<std::uint8_t>());
  check(cudaMemcpy(out.data.data(), d_data.get(), out.data.size(), cudaMemcpyDeviceToHost),
        "cudaMemcpy (data to host)");
  check(cudaMemcpy(out.scale.data(), d_scale.get(), out.scale.size(), cudaMemcpyDeviceToHost),
        "cudaMemcpy (scales to host)");
  return out;
}

void dequantize_mxfp8_cuda(const Mxfp8ConstView& src, TensorView output) {
  check_dtype(output.dtype, "dequantize_mxfp8_cuda output");
  check_shape(src.rows, src.cols, "dequantize_mxfp8_cuda");
  SW_REQUIRE(src.layout == Mxfp8ScaleLayout::kRowMajor, InvalidArgument,
             "dequantize_mxfp8_cuda: only the row-major scale layout is supported");
  const Mxfp8Geometry g = mxfp8_geometry(src.rows, src.cols, src.layout);
  SW_REQUIRE(static_cast<std::int64_t>(src.data.size()) >= g.data_bytes &&
                 static_cast<std::int64_t>(src.scale.size()) >= g.scale_bytes,
             ShapeError, "dequantize_mxfp8_cuda: buffers too small for [", src.rows, ", ", src.cols,
             "]");
  SW_REQUIRE(output.numel == src.rows * src.cols, ShapeError, "dequantize_mxfp8_cuda: output has ",
             output.numel, " elements, needs ", src.rows * src.cols);
  if (output.numel == 0) return;
  require_gpu();
  const auto data_bytes = static_cast<std::size_t>(g.data_bytes);
  const auto scale_bytes = static_cast<std::size_t>(g.scale_bytes);
  DeviceBuffer d_data(data_bytes), d_scale(scale_bytes), d_out(output.nbytes());
  check(cudaMemcpy(d_data.get(), src.data.data(), data_bytes, cudaMemcpyHostToDevice),
        "cudaMemcpy (data to device)");
  check(cudaMemcpy(d_scale.get(), src.scale.data(), scale_bytes, cudaMemcpyHostToDevice),
        "cudaMemcpy (scales to device)");
  dequantize_mxfp8_device(d_data.as<std::uint8_t>(), d_scale.as<std::uint8_t>(), src.rows, src.cols,
                          d_out.get(), output.dtype);
  check(cudaMemcpy(output.data, d_out.get(), output.nbytes(), cudaMemcpyDeviceToHost),
        "cudaMemcpy (output to host)");
}

}  // namespace shardwise::cuda
