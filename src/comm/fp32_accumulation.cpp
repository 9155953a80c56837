#include "shardwise/comm/fp32_accumulation.hpp"

#include <algorithm>

#include "shardwise/core/float_convert.hpp"

namespace shardwise {

bool reduces_through_fp32(DType dtype) {
  return dtype == DType::kBFloat16 || dtype == DType::kFloat16;
}

void widen_to_fp32(TensorView src, float* dst) {
  SW_CHECK(reduces_through_fp32(src.dtype), "widen_to_fp32 of ", dtype_name(src.dtype));
  convert_floats(src, {dst, src.numel, DType::kFloat32}, "widen_to_fp32");
}

void narrow_from_fp32(const float* src, TensorView dst, int divisor) {
  SW_CHECK(reduces_through_fp32(dst.dtype), "narrow_from_fp32 to ", dtype_name(dst.dtype));
  SW_CHECK(divisor >= 1, "divisor ", divisor);
  // convert_floats reads a TensorView; src is only read.
  TensorView in{const_cast<float*>(src), dst.numel, DType::kFloat32};
  if (divisor == 1) {
    convert_floats(in, dst, "narrow_from_fp32");
    return;
  }
  // Division (not multiplication by 1/p) so AVG is the correctly rounded fp32 quotient; done a
  // cache-sized chunk at a time into a stack buffer, then narrowed.
  constexpr std::int64_t kChunk = 1024;
  float quotient[kChunk];
  const float d = static_cast<float>(divisor);
  for (std::int64_t i = 0; i < dst.numel; i += kChunk) {
    const std::int64_t n = std::min(kChunk, dst.numel - i);
    for (std::int64_t j = 0; j < n; ++j) quotient[j] = src[i + j] / d;
    convert_floats({quotient, n, DType::kFloat32}, dst.slice(i, n), "narrow_from_fp32");
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
