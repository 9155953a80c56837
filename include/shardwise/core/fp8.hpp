// Scalar codecs for the two 8-bit formats of MXFP8: E4M3 element bytes and E8M0 scale bytes.
// Header-only and branch-free so loops over them inline and vectorise (see mxfp8.cpp).
//
// E4M3 is the OCP "E4M3FN" variant: 1 sign, 4 exponent (bias 7), 3 mantissa bits, no
// infinities; S.1111.111 (0x7F / 0xFF) is NaN, so the largest finite value is 1.75 * 2^8 = 448.
// Subnormals are m * 2^-9 (m = 1..7); the smallest normal is 2^-6.
// E8M0 is an unsigned power of two: byte e means 2^(e - 127); 0xFF is NaN; there is no zero.
#pragma once

#include <bit>
#include <cstdint>

namespace shardwise {

using e4m3_bits = std::uint8_t;
using e8m0_bits = std::uint8_t;

inline constexpr float kE4M3Max = 448.0f;
inline constexpr e4m3_bits kE4M3NaN = 0x7f;  // canonical positive NaN; 0xFF is the negative one
inline constexpr e4m3_bits kE4M3MaxCode = 0x7e;
inline constexpr e8m0_bits kE8M0NaN = 0xff;
inline constexpr int kE8M0Bias = 127;

namespace fp8_detail {
// fp32 bit patterns used by the codecs.
inline constexpr std::uint32_t kF32AbsMask = 0x7fffffffu;
inline constexpr std::uint32_t kF32Inf = 0x7f800000u;
inline constexpr std::uint32_t kF32Of448 = 0x43e00000u;        // 448 = 1.75 * 2^8
inline constexpr std::uint32_t kF32OfMinNormal = 0x3c800000u;  // 2^-6, smallest E4M3 normal
inline constexpr float kSubnormalMagic = 16384.0f;             // 2^14: its ulp is 2^-9
inline constexpr std::uint32_t kF32OfSubnormalMagic = 0x46800000u;
inline constexpr std::uint32_t kExponentRebias = (127u - 7u) << 23;  // fp32 bias -> E4M3 bias

// c ? a : b written as bit arithmetic, so GCC's vectoriser never sees control flow.
inline std::uint32_t select(bool c, std::uint32_t a, std::uint32_t b) {
  return b ^ ((a ^ b) & (0u - static_cast<std::uint32_t>(c)));
}

// Encodes the magnitude bits `abs` (sign cleared, finite or Inf, not NaN) as an E4M3 magnitude
// code 0..0x7E, round-to-nearest-even, saturating at 448. Written without branches so a loop
// calling it becomes selects.
inline std::uint32_t encode_e4m3_magnitude(std::uint32_t abs) {
  // Anything above 448 (RNE of values in (448, 464) is 448 too) saturates; Inf included.
  const std::uint32_t sat = select(abs < kF32Of448, abs, kF32Of448);
  // Normal range [2^-6, 448]: drop 20 mantissa bits with RNE, then rebias 127 -> 7. A carry
  // out of the mantissa bumps the exponent, which is the right result.
  const std::uint32_t rounded = sat + 0x7ffffu + ((sat >> 20) & 1u);
  const std::uint32_t normal = (rounded - kExponentRebias) >> 20;
  // Subnormal range [0, 2^-6): adding 2^14 (ulp 2^-9) rounds to a multiple of 2^-9, RNE, in
  // the FPU; the low bits of the sum are then the count m (0..8; 8 is the smallest normal).
  const float sum = std::bit_cast<float>(sat) + kSubnormalMagic;
  const std::uint32_t subnormal = std::bit_cast<std::uint32_t>(sum) - kF32OfSubnormalMagic;
  return select(sat < kF32OfMinNormal, subnormal, normal);
}
}  // namespace fp8_detail

// fp32 -> E4M3FN: round-to-nearest-even; finite values beyond +-448 and +-Inf saturate to +-448
// (the "satfinite" behaviour of cvt.rn.satfinite.e4m3x2.f32); NaN -> 0x7F / 0xFF by sign.
inline e4m3_bits float_to_e4m3(float f) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  const std::uint32_t sign = (u >> 24) & 0x80u;
  const std::uint32_t abs = u & fp8_detail::kF32AbsMask;
  const std::uint32_t magnitude = fp8_detail::select(abs > fp8_detail::kF32Inf, kE4M3NaN,
                                                     fp8_detail::encode_e4m3_magnitude(abs));
  return static_cast<e4m3_bits>(sign | magnitude);
}

// E4M3FN -> fp32 (exact; every E4M3 value is an fp32 value). 0x7F / 0xFF -> NaN.
inline float e4m3_to_float(e4m3_bits code) {
  const std::uint32_t sign = static_cast<std::uint32_t>(code & 0x80u) << 24;
  const std::uint32_t abs = code & 0x7fu;
  // Normal: exponent and mantissa move up into fp32 position and the bias goes 7 -> 127.
  const std::uint32_t normal = (abs << 20) + fp8_detail::kExponentRebias;
  // Subnormal (exponent field 0): m * 2^-9.
  const float subnormal = static_cast<float>(abs & 7u) * 0.001953125f;
  std::uint32_t bits =
      fp8_detail::select(abs < 8u, std::bit_cast<std::uint32_t>(subnormal), normal);
  bits = fp8_detail::select(abs == 0x7fu, 0x7fc00000u, bits);
  return std::bit_cast<float>(sign | bits);
}

// E8M0 -> fp32: 2^(e - 127); 0 -> 2^-127 (an fp32 subnormal); 0xFF -> NaN.
inline float e8m0_to_float(e8m0_bits e) {
  std::uint32_t bits = static_cast<std::uint32_t>(e) << 23;
  bits = e == 0 ? 0x00400000u : bits;
  bits = e == kE8M0NaN ? 0x7fc00000u : bits;
  return std::bit_cast<float>(bits);
}

// The E8M0 byte for 2^exponent, with the exponent clamped to the representable [-127, 127].
inline e8m0_bits e8m0_from_exponent(int exponent) {
  const int clamped = exponent < -kE8M0Bias ? -kE8M0Bias : (exponent > 127 ? 127 : exponent);
  return static_cast<e8m0_bits>(clamped + kE8M0Bias);
}

}  // namespace shardwise
