// Branch-free forms of the scalar conversions in float_convert.hpp (private to shardwise_core).
// Same results bit for bit (tests compare them over every 16-bit code and many fp32 values);
// written with selects instead of early returns so that loops over them vectorise.
#pragma once

#include <bit>
#include <cstdint>

#include "shardwise/core/fp8.hpp"

namespace shardwise::convert_lanes {

using fp8_detail::select;

// fp16 -> fp32 (float_convert.hpp's fp16_to_float branches per element).
inline float fp16_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exponent = h & 0x7c00u;
  const std::uint32_t normal = (static_cast<std::uint32_t>(h & 0x7fffu) << 13) + (112u << 23);
  const std::uint32_t inf_nan = normal + (112u << 23);  // exponent field 31 -> 255
  const float sub = static_cast<float>(h & 0x3ffu) * 5.9604644775390625e-08f;  // m * 2^-24
  std::uint32_t bits = select(exponent == 0x7c00u, inf_nan, normal);
  bits = select(exponent == 0, std::bit_cast<std::uint32_t>(sub), bits);
  return std::bit_cast<float>(sign | bits);
}

// fp32 -> bf16, RNE, NaN kept quiet with its sign and top payload bits.
inline std::uint16_t float_to_bf16(float f) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  const std::uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const std::uint32_t quiet_nan = (u >> 16) | 0x40u;
  return static_cast<std::uint16_t>(
      select((u & fp8_detail::kF32AbsMask) > fp8_detail::kF32Inf, quiet_nan, rounded));
}

// fp32 -> fp16, RNE, overflow to infinity, NaN -> the canonical quiet NaN with its sign.
inline std::uint16_t float_to_fp16(float f) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  const std::uint32_t sign = (u >> 16) & 0x8000u;
  const std::uint32_t abs = u & fp8_detail::kF32AbsMask;
  // Subnormal result: abs * 2^24 (exact) rounded to an integer by adding 2^23 in the FPU; the
  // low mantissa bits of the sum are that integer. Garbage (but defined) for larger inputs.
  const float magic = std::bit_cast<float>(abs) * 16777216.0f + 8388608.0f;
  const std::uint32_t subnormal = std::bit_cast<std::uint32_t>(magic) - 0x4b000000u;
  // Normal result: rebias 127 -> 15 and round 13 mantissa bits away (wraps for tiny inputs,
  // which take the subnormal branch).
  const std::uint32_t v = abs - (112u << 23);
  const std::uint32_t normal = (v + 0xfffu + ((v >> 13) & 1u)) >> 13;
  std::uint32_t bits = select(abs < 0x38800000u, subnormal, normal);
  bits = select(abs >= 0x477ff000u, 0x7c00u, bits);
  bits = select(abs > fp8_detail::kF32Inf, 0x7e00u, bits);
  return static_cast<std::uint16_t>(sign | bits);
}

}  // namespace shardwise::convert_lanes
