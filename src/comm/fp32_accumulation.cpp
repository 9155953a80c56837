#include "shardwise/comm/fp32_accumulation.hpp"

#include "shardwise/core/float_convert.hpp"

namespace shardwise {

bool reduces_through_fp32(DType dtype) {
  return dtype == DType::kBFloat16 || dtype == DType::kFloat16;
}

void widen_to_fp32(TensorView src, float* dst) {
  SW_CHECK(reduces_through_fp32(src.dtype), "widen_to_fp32 of ", dtype_name(src.dtype));
  const auto* in = static_cast<const std::uint16_t*>(src.data);
  const std::int64_t n = src.numel;
  if (src.dtype == DType::kBFloat16) {
    for (std::int64_t i = 0; i < n; ++i) dst[i] = bf16_to_float(in[i]);
  } else {
    for (std::int64_t i = 0; i < n; ++i) dst[i] = fp16_to_float(in[i]);
  }
}

void narrow_from_fp32(const float* src, TensorView dst, int divisor) {
  SW_CHECK(reduces_through_fp32(dst.dtype), "narrow_from_fp32 to ", dtype_name(dst.dtype));
  SW_CHECK(divisor >= 1, "divisor ", divisor);
  auto* out = static_cast<std::uint16_t*>(dst.data);
  const std::int64_t n = dst.numel;
  // Division (not multiplication by 1/p) so AVG is the correctly rounded fp32 quotient.
  const float d = static_cast<float>(divisor);
  if (dst.dtype == DType::kBFloat16) {
    if (divisor == 1) {
      for (std::int64_t i = 0; i < n; ++i) out[i] = float_to_bf16(src[i]);
    } else {
      for (std::int64_t i = 0; i < n; ++i) out[i] = float_to_bf16(src[i] / d);
    }
  } else {
    if (divisor == 1) {
      for (std::int64_t i = 0; i < n; ++i) out[i] = float_to_fp16(src[i]);
    } else {
      for (std::int64_t i = 0; i < n; ++i) out[i] = float_to_fp16(src[i] / d);
    }
  }
}

void divide_fp32(TensorView buffer, int divisor) {
  SW_CHECK(buffer.dtype == DType::kFloat32, "divide_fp32 of ", dtype_name(buffer.dtype));
  if (divisor == 1) return;
  float* data = buffer.as<float>();
  const float d = static_cast<float>(divisor);
  for (std::int64_t i = 0; i < buffer.numel; ++i) data[i] /= d;
}

}  // namespace shardwise
