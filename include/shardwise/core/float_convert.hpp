// Conversions between fp32 and the 16-bit float formats, round-to-nearest-even: scalar
// (header-only, inline) and bulk (vectorised for the CPU at run time, see cpu_isa.hpp). The bulk
// routines give exactly the bits of the scalar ones; every layer converts arrays through them.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

#include "shardwise/core/tensor_view.hpp"

namespace shardwise {

using bf16_bits = std::uint16_t;
using fp16_bits = std::uint16_t;

inline float bf16_to_float(bf16_bits h) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16);
}

// Round-to-nearest-even; NaN stays a (quiet) NaN with its sign.
inline bf16_bits float_to_bf16(float f) {
  std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<bf16_bits>((u >> 16) | 0x0040u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<bf16_bits>(u >> 16);
}

// Rounds an fp32 value to the nearest bf16-representable value (kept in fp32).
inline float round_to_bf16(float f) { return bf16_to_float(float_to_bf16(f)); }

inline float fp16_to_float(fp16_bits h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1fu;
  const std::uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    // Zero or subnormal: mant * 2^-24.
    const float v = static_cast<float>(mant) * 5.9604644775390625e-08f;
    return sign ? -v : v;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
  return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (mant << 13));
}

// Round-to-nearest-even with overflow to infinity; NaN stays NaN.
inline fp16_bits float_to_fp16(float f) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  const std::uint32_t sign = (u >> 16) & 0x8000u;
  const std::uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<fp16_bits>(sign | 0x7e00u);   // NaN
  if (abs >= 0x477ff000u) return static_cast<fp16_bits>(sign | 0x7c00u);  // >= 65520: inf
  if (abs < 0x38800000u) {
    // Result is subnormal (or zero): value / 2^-24 rounded to an integer, RNE.
    const float scaled = std::bit_cast<float>(abs) * 16777216.0f;  // exact (power of two)
    // Adding 2^23 forces rounding of the fraction at the integer position, RNE.
    const float rounded = (scaled + 8388608.0f) - 8388608.0f;
    return static_cast<fp16_bits>(sign | static_cast<std::uint32_t>(rounded));
  }
  // Normal: rebias exponent (127 -> 15) and round 13 mantissa bits away, RNE.
  std::uint32_t v = abs - (112u << 23);
  v += 0xfffu + ((v >> 13) & 1u);
  return static_cast<fp16_bits>(sign | (v >> 13));
}

// Bulk conversions of n elements (n >= 0; src and dst must not overlap).
void bf16_to_float_n(const bf16_bits* src, float* dst, std::int64_t n);
void fp16_to_float_n(const fp16_bits* src, float* dst, std::int64_t n);
void float_to_bf16_n(const float* src, bf16_bits* dst, std::int64_t n);
void float_to_fp16_n(const float* src, fp16_bits* dst, std::int64_t n);

// Converts src into dst element by element; each side fp32, bf16 or fp16 (equal dtypes copy).
// A 16-bit -> 16-bit conversion goes through fp32 (exact for the widening step). Throws
// InvalidArgument naming `what` for another dtype, ShapeError when the element counts differ.
void convert_floats(TensorView src, TensorView dst, std::string_view what = "convert_floats");

}  // namespace shardwise
