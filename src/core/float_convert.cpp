// Bulk fp32 <-> bf16 / fp16 conversion: one branch-free loop per direction (float_convert_lanes.hpp)
// compiled once per ISA level and picked at run time.
#include "shardwise/core/float_convert.hpp"

#include <algorithm>

#include "float_convert_lanes.hpp"
#include "shardwise/core/cpu_isa.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise {
namespace {

struct ConvertKernels {
  void (*bf16_to_f32)(const bf16_bits*, float*, std::int64_t);
  void (*f16_to_f32)(const fp16_bits*, float*, std::int64_t);
  void (*f32_to_bf16)(const float*, bf16_bits*, std::int64_t);
  void (*f32_to_f16)(const float*, fp16_bits*, std::int64_t);
};

SW_KERNEL_INLINE void bf16_to_f32_body(const bf16_bits* __restrict src, float* __restrict dst,
                                       std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) dst[i] = bf16_to_float(src[i]);
}
SW_KERNEL_INLINE void f16_to_f32_body(const fp16_bits* __restrict src, float* __restrict dst,
                                      std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) dst[i] = convert_lanes::fp16_to_float(src[i]);
}
SW_KERNEL_INLINE void f32_to_bf16_body(const float* __restrict src, bf16_bits* __restrict dst,
                                       std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) dst[i] = convert_lanes::float_to_bf16(src[i]);
}
SW_KERNEL_INLINE void f32_to_f16_body(const float* __restrict src, fp16_bits* __restrict dst,
                                      std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) dst[i] = convert_lanes::float_to_fp16(src[i]);
}

// One set of wrappers per level; ATTR is the level's target attribute.
#define SW_CONVERT_KERNELS(SUFFIX, ATTR)                                               \
  ATTR void bf16_to_f32_##SUFFIX(const bf16_bits* s, float* d, std::int64_t n) {     \
    bf16_to_f32_body(s, d, n);                                                         \
  }                                                                                    \
  ATTR void f16_to_f32_##SUFFIX(const fp16_bits* s, float* d, std::int64_t n) {      \
    f16_to_f32_body(s, d, n);                                                          \
  }                                                                                    \
  ATTR void f32_to_bf16_##SUFFIX(const float* s, bf16_bits* d, std::int64_t n) {     \
    f32_to_bf16_body(s, d, n);                                                         \
  }                                                                                    \
  ATTR void f32_to_f16_##SUFFIX(const float* s, fp16_bits* d, std::int64_t n) {      \
    f32_to_f16_body(s, d, n);                                                          \
  }                                                                                    \
  constexpr ConvertKernels kConvert_##SUFFIX = {bf16_to_f32_##SUFFIX, f16_to_f32_##SUFFIX, \
                                                f32_to_bf16_##SUFFIX, f32_to_f16_##SUFFIX};

SW_CONVERT_KERNELS(baseline, )
SW_CONVERT_KERNELS(avx2, SW_TARGET_AVX2)
SW_CONVERT_KERNELS(avx512, SW_TARGET_AVX512)
#undef SW_CONVERT_KERNELS

constexpr ConvertKernels kConvertKernels[kNumIsaLevels] = {kConvert_baseline, kConvert_avx2,
                                                           kConvert_avx512};

const ConvertKernels& kernels() { return dispatch(kConvertKernels); }

bool is_16bit_float(DType d) { return d == DType::kBFloat16 || d == DType::kFloat16; }

void check_float_dtype(DType d, std::string_view what, const char* side) {
  SW_REQUIRE(d == DType::kFloat32 || is_16bit_float(d), InvalidArgument, what, ": ", side,
             " dtype ", dtype_name(d), " is not a float type (expected fp32, bf16 or fp16)");
}

// 16-bit -> 16-bit through an fp32 staging buffer on the stack, a chunk at a time.
void convert_16_to_16(TensorView src, TensorView dst) {
  constexpr std::int64_t kChunk = 1024;
  float staging[kChunk];
  const auto* in = static_cast<const std::uint16_t*>(src.data);
  auto* out = static_cast<std::uint16_t*>(dst.data);
  for (std::int64_t i = 0; i < src.numel; i += kChunk) {
    const std::int64_t n = std::min(kChunk, src.numel - i);
    if (src.dtype == DType::kBFloat16) {
      bf16_to_float_n(in + i, staging, n);
    } else {
      fp16_to_float_n(in + i, staging, n);
    }
    if (dst.dtype == DType::kBFloat16) {
      float_to_bf16_n(staging, out + i, n);
    } else {
      float_to_fp16_n(staging, out + i, n);
    }
  }
}

}  // namespace

void bf16_to_float_n(const bf16_bits* src, float* dst, std::int64_t n) {
  kernels().bf16_to_f32(src, dst, n);
}
void fp16_to_float_n(const fp16_bits* src, float* dst, std::int64_t n) {
  kernels().f16_to_f32(src, dst, n);
}
void float_to_bf16_n(const float* src, bf16_bits* dst, std::int64_t n) {
  kernels().f32_to_bf16(src, dst, n);
}
void float_to_fp16_n(const float* src, fp16_bits* dst, std::int64_t n) {
  kernels().f32_to_f16(src, dst, n);
}

void convert_floats(TensorView src, TensorView dst, std::string_view what) {
  check_float_dtype(src.dtype, what, "source");
  check_float_dtype(dst.dtype, what, "destination");
  SW_REQUIRE(src.numel == dst.numel, ShapeError, what, ": source has ", src.numel,
             " elements, destination ", dst.numel);
  if (src.numel == 0) return;
  if (src.dtype == dst.dtype) {
    std::memcpy(dst.data, src.data, src.nbytes());
  } else if (src.dtype == DType::kFloat32) {
    const auto* in = static_cast<const float*>(src.data);
    auto* out = static_cast<std::uint16_t*>(dst.data);
    if (dst.dtype == DType::kBFloat16) {
      float_to_bf16_n(in, out, src.numel);
    } else {
      float_to_fp16_n(in, out, src.numel);
    }
  } else if (dst.dtype == DType::kFloat32) {
    const auto* in = static_cast<const std::uint16_t*>(src.data);
    auto* out = static_cast<float*>(dst.data);
    if (src.dtype == DType::kBFloat16) {
      bf16_to_float_n(in, out, src.numel);
    } else {
      fp16_to_float_n(in, out, src.numel);
    }
  } else {
    convert_16_to_16(src, dst);
  }
}

}  // namespace shardwise
