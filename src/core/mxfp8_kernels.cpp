// Hot loops of the MXFP8 codec. Every per-element step is branch-free integer / float arithmetic
// (see fp8.hpp), so GCC vectorises the fixed 32-element block loops. Each entry point is compiled
// once per ISA level (baseline, AVX2, AVX-512; cpu_isa.hpp) and picked at run time, since the
// project builds for the baseline ISA. On AVX-512 the bf16 quantize and dequantize, and on AVX2
// the bf16 dequantize, use kernels written with intrinsics in 16-bit lanes (end of file), twice
// as many elements per instruction as the fp32-lane loops; on AVX2 the bf16 and fp32 quantize use
// the intrinsics kernels of mxfp8_quantize_avx2.cpp. All fall back to the loops of their level
// for the blocks they do not cover.
#include "mxfp8_kernels.hpp"

#include <array>
#include <bit>
#include <cstdint>

#include "float_convert_lanes.hpp"
#include "mxfp8_quantize_avx2.hpp"
#include "shardwise/core/cpu_isa.hpp"
#include "shardwise/core/float_convert.hpp"

#if SW_HAVE_ISA_LEVELS
#include <immintrin.h>
// GCC 12 warns inside avx512fintrin.h (the extract / narrow intrinsics read an "undefined"
// register on purpose).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace shardwise::mxfp8_kernels {
namespace {

using fp8_detail::encode_e4m3_magnitude;
using fp8_detail::kF32AbsMask;
using fp8_detail::kF32Inf;
using fp8_detail::select;

// Biased E8M0 exponent of the block scale from the magnitude bits of amax (finite).
// kCeil: smallest 2^e with amax <= 448 * 2^e. Write amax = m * 2^E, m in [1, 2): then
//   amax / 448 = (m / 1.75) * 2^(E-8), and m / 1.75 is in (0.57, 1] when m <= 1.75 (mantissa
//   bits <= 0x600000), else in (1, 1.15); so e = E - 8 + (mantissa > 0x600000). Exact, no
//   division. An fp32-subnormal amax (E field 0) is far below 448 * 2^-127 and clamps to 0.
// kFloor: e = floor(log2(amax)) - 8 = E - 8 (subnormal amax again clamps to 0).
template <Mxfp8ScaleRule kRule>
inline std::uint32_t scale_biased_exponent(std::uint32_t amax) {
  int biased = static_cast<int>(amax >> 23) - 8;
  if constexpr (kRule == Mxfp8ScaleRule::kCeil) biased += (amax & 0x7fffffu) > 0x600000u ? 1 : 0;
  biased = biased < 0 ? 0 : biased;
  // Finite fp32 amax gives at most 254 - 8 + 1 = 247, so 2^-(e) below stays a normal float.
  return static_cast<std::uint32_t>(biased > 254 ? 254 : biased);
}

// Blocks are processed in groups: first every block's amax, then every scale, then the
// elements. Splitting the passes keeps the per-block reduction -> scale -> multiply dependency
// chain out of the element loop, so the CPU overlaps blocks instead of waiting on each.
constexpr std::int64_t kGroupBlocks = 16;

template <Mxfp8ScaleRule kRule, typename In, typename ToFloat>
inline std::uint32_t block_amax_bits(const In* __restrict x, ToFloat to_float) {
  std::uint32_t amax = 0;
  for (int i = 0; i < kBlock; ++i) {
    std::uint32_t a = std::bit_cast<std::uint32_t>(to_float(x[i])) & kF32AbsMask;
    // Unsigned compare orders fp32 magnitudes; NaN/Inf compare above every finite value. The
    // ceil rule leaves them out of amax (they become NaN elements, see mxfp8.hpp).
    if constexpr (kRule == Mxfp8ScaleRule::kCeil) a = select(a < kF32Inf, a, 0u);
    amax = amax > a ? amax : a;
  }
  return amax;
}

template <Mxfp8ScaleRule kRule, typename In, typename ToFloat>
inline void encode_block(const In* __restrict x, float inverse_scale, std::uint8_t* __restrict out,
                         ToFloat to_float) {
  for (int i = 0; i < kBlock; ++i) {
    const std::uint32_t u = std::bit_cast<std::uint32_t>(to_float(x[i]));
    const std::uint32_t abs = u & kF32AbsMask;
    // Multiplying by a power of two is exact (barring underflow far below E4M3's range).
    const std::uint32_t scaled =
        std::bit_cast<std::uint32_t>(std::bit_cast<float>(abs) * inverse_scale);
    std::uint32_t magnitude = encode_e4m3_magnitude(scaled);
    if constexpr (kRule == Mxfp8ScaleRule::kCeil) {
      magnitude = select(abs >= kF32Inf, kE4M3NaN, magnitude);
    }
    out[i] = static_cast<std::uint8_t>(((u >> 24) & 0x80u) | magnitude);
  }
}

// Quantizes up to kGroupBlocks contiguous blocks. Inputs are converted to fp32 as they are
// read (twice: amax pass and encode pass), never staged through a buffer: a wide load of
// data just stored by narrower stores would stall on store forwarding.
template <Mxfp8ScaleRule kRule, typename In, typename ToFloat>
inline void quantize_group(const In* __restrict x, std::uint8_t* __restrict out,
                           std::uint8_t* __restrict scales, std::int64_t nblocks,
                           ToFloat to_float) {
  std::uint32_t amax[kGroupBlocks];
  float inverse_scale[kGroupBlocks];
  for (std::int64_t b = 0; b < nblocks; ++b) {
    amax[b] = block_amax_bits<kRule>(x + b * kBlock, to_float);
  }
  for (std::int64_t b = 0; b < nblocks; ++b) {
    const std::uint32_t biased = scale_biased_exponent<kRule>(amax[b]);
    scales[b] = static_cast<std::uint8_t>(biased);
    // 1 / 2^(biased - 127) = 2^(127 - (biased - 127)): fp32 exponent field 254 - biased.
    inverse_scale[b] = std::bit_cast<float>((254u - biased) << 23);
  }
  for (std::int64_t b = 0; b < nblocks; ++b) {
    encode_block<kRule>(x + b * kBlock, inverse_scale[b], out + b * kBlock, to_float);
  }
  if constexpr (kRule == Mxfp8ScaleRule::kFloor) {
    for (std::int64_t b = 0; b < nblocks; ++b) {
      if (amax[b] < kF32Inf) continue;
      // OCP: a NaN/Inf anywhere makes the shared scale NaN and every element NaN.
      scales[b] = kE8M0NaN;
      for (int i = 0; i < kBlock; ++i) {
        const std::uint32_t u = std::bit_cast<std::uint32_t>(to_float(x[b * kBlock + i]));
        out[b * kBlock + i] = static_cast<std::uint8_t>(((u >> 24) & 0x80u) | kE4M3NaN);
      }
    }
  }
}

// e4m3 * scale with the sign put back from the element's code. Both factors of the product are
// then non-negative, so a NaN product is the canonical quiet NaN whichever operand the vector
// code happens to put first (x86 returns the first operand's NaN), and every ISA level gives the
// same bits. Scales are positive, so for numbers this is exactly the signed product.
inline float scaled_element(std::uint8_t code, float scale) {
  const float magnitude = e4m3_to_float(code & 0x7fu) * scale;
  return std::bit_cast<float>(std::bit_cast<std::uint32_t>(magnitude) |
                              (static_cast<std::uint32_t>(code & 0x80u) << 24));
}

template <Mxfp8ScaleRule kRule, typename In, typename ToFloat>
inline void quantize_blocks(const In* src, std::uint8_t* data, std::uint8_t* scales,
                            std::int64_t nblocks, ToFloat to_float) {
  for (std::int64_t b = 0; b < nblocks; b += kGroupBlocks) {
    const std::int64_t n = nblocks - b < kGroupBlocks ? nblocks - b : kGroupBlocks;
    quantize_group<kRule>(src + b * kBlock, data + b * kBlock, scales + b, n, to_float);
  }
}

SW_KERNEL_INLINE void quantize_f32_body(const float* src, std::uint8_t* data, std::uint8_t* scales,
                                        std::int64_t nblocks, Mxfp8ScaleRule rule) {
  const auto to_float = [](float f) { return f; };
  if (rule == Mxfp8ScaleRule::kCeil) {
    quantize_blocks<Mxfp8ScaleRule::kCeil>(src, data, scales, nblocks, to_float);
  } else {
    quantize_blocks<Mxfp8ScaleRule::kFloor>(src, data, scales, nblocks, to_float);
  }
}

SW_KERNEL_INLINE void quantize_bf16_body(const std::uint16_t* src, std::uint8_t* data,
                                         std::uint8_t* scales, std::int64_t nblocks,
                                         Mxfp8ScaleRule rule) {
  const auto to_float = [](std::uint16_t h) { return bf16_to_float(h); };
  if (rule == Mxfp8ScaleRule::kCeil) {
    quantize_blocks<Mxfp8ScaleRule::kCeil>(src, data, scales, nblocks, to_float);
  } else {
    quantize_blocks<Mxfp8ScaleRule::kFloor>(src, data, scales, nblocks, to_float);
  }
}

SW_KERNEL_INLINE void quantize_f16_body(const std::uint16_t* src, std::uint8_t* data,
                                        std::uint8_t* scales, std::int64_t nblocks,
                                        Mxfp8ScaleRule rule) {
  const auto to_float = [](std::uint16_t h) { return convert_lanes::fp16_to_float(h); };
  if (rule == Mxfp8ScaleRule::kCeil) {
    quantize_blocks<Mxfp8ScaleRule::kCeil>(src, data, scales, nblocks, to_float);
  } else {
    quantize_blocks<Mxfp8ScaleRule::kFloor>(src, data, scales, nblocks, to_float);
  }
}

// e4m3 * scale is exact in fp32 (4 significant bits) except when the product is an fp32
// subnormal, where the multiply rounds it RNE, or past fp32's range: the ceil rule can round a
// block's largest element (up to fp32 max) to 256 * 2^k = 2^128, which is inf (OCP's floor rule
// saturates to 448 * 2^k instead).
SW_KERNEL_INLINE void dequantize_f32_body(const std::uint8_t* __restrict data,
                                          const std::uint8_t* scales, float* __restrict out,
                                          std::int64_t nblocks) {
  for (std::int64_t b = 0; b < nblocks; ++b) {
    const float scale = e8m0_to_float(scales[b]);
    for (int i = 0; i < kBlock; ++i)
      out[b * kBlock + i] = scaled_element(data[b * kBlock + i], scale);
  }
}

SW_KERNEL_INLINE void dequantize_bf16_body(const std::uint8_t* __restrict data,
                                           const std::uint8_t* scales,
                                           std::uint16_t* __restrict out, std::int64_t nblocks) {
  for (std::int64_t b = 0; b < nblocks; ++b) {
    const float scale = e8m0_to_float(scales[b]);
    for (int i = 0; i < kBlock; ++i)
      out[b * kBlock + i] =
          convert_lanes::float_to_bf16(scaled_element(data[b * kBlock + i], scale));
  }
}

SW_KERNEL_INLINE void dequantize_f16_body(const std::uint8_t* __restrict data,
                                          const std::uint8_t* scales, std::uint16_t* __restrict out,
                                          std::int64_t nblocks) {
  for (std::int64_t b = 0; b < nblocks; ++b) {
    const float scale = e8m0_to_float(scales[b]);
    for (int i = 0; i < kBlock; ++i)
      out[b * kBlock + i] =
          convert_lanes::float_to_fp16(scaled_element(data[b * kBlock + i], scale));
  }
}

struct Kernels {
  void (*quantize_f32)(const float*, std::uint8_t*, std::uint8_t*, std::int64_t, Mxfp8ScaleRule);
  void (*quantize_bf16)(const std::uint16_t*, std::uint8_t*, std::uint8_t*, std::int64_t,
                        Mxfp8ScaleRule);
  void (*quantize_f16)(const std::uint16_t*, std::uint8_t*, std::uint8_t*, std::int64_t,
                       Mxfp8ScaleRule);
  void (*dequantize_f32)(const std::uint8_t*, const std::uint8_t*, float*, std::int64_t);
  void (*dequantize_bf16)(const std::uint8_t*, const std::uint8_t*, std::uint16_t*, std::int64_t);
  void (*dequantize_f16)(const std::uint8_t*, const std::uint8_t*, std::uint16_t*, std::int64_t);
};

// One set of wrappers per level; ATTR is the level's target attribute.
#define SW_MXFP8_KERNELS(SUFFIX, ATTR)                                                        \
  ATTR void quantize_f32_##SUFFIX(const float* s, std::uint8_t* d, std::uint8_t* sc,          \
                                  std::int64_t n, Mxfp8ScaleRule r) {                         \
    quantize_f32_body(s, d, sc, n, r);                                                        \
  }                                                                                           \
  ATTR void quantize_bf16_##SUFFIX(const std::uint16_t* s, std::uint8_t* d, std::uint8_t* sc, \
                                   std::int64_t n, Mxfp8ScaleRule r) {                        \
    quantize_bf16_body(s, d, sc, n, r);                                                       \
  }                                                                                           \
  ATTR void quantize_f16_##SUFFIX(const std::uint16_t* s, std::uint8_t* d, std::uint8_t* sc,  \
                                  std::int64_t n, Mxfp8ScaleRule r) {                         \
    quantize_f16_body(s, d, sc, n, r);                                                        \
  }                                                                                           \
  ATTR void dequantize_f32_##SUFFIX(const std::uint8_t* d, const std::uint8_t* sc, float* o,  \
                                    std::int64_t n) {                                         \
    dequantize_f32_body(d, sc, o, n);                                                         \
  }                                                                                           \
  ATTR void dequantize_bf16_##SUFFIX(const std::uint8_t* d, const std::uint8_t* sc,           \
                                     std::uint16_t* o, std::int64_t n) {                      \
    dequantize_bf16_body(d, sc, o, n);                                                        \
  }                                                                                           \
  ATTR void dequantize_f16_##SUFFIX(const std::uint8_t* d, const std::uint8_t* sc,            \
                                    std::uint16_t* o, std::int64_t n) {                       \
    dequantize_f16_body(d, sc, o, n);                                                         \
  }                                                                                           \
  constexpr Kernels kKernels_##SUFFIX = {quantize_f32_##SUFFIX,    quantize_bf16_##SUFFIX,    \
                                         quantize_f16_##SUFFIX,    dequantize_f32_##SUFFIX,   \
                                         dequantize_bf16_##SUFFIX, dequantize_f16_##SUFFIX};

SW_MXFP8_KERNELS(baseline, )
SW_MXFP8_KERNELS(avx2, SW_TARGET_AVX2)
SW_MXFP8_KERNELS(avx512, SW_TARGET_AVX512)
#undef SW_MXFP8_KERNELS

#if SW_HAVE_ISA_LEVELS
// bf16 bits of every E4M3 magnitude code 0..127 (0x7F: the quiet NaN float_to_bf16 makes).
const std::uint16_t* e4m3_magnitude_to_bf16_table() {
  alignas(64) static const std::array<std::uint16_t, 128> table = [] {
    std::array<std::uint16_t, 128> t{};
    for (std::uint32_t c = 0; c < 128; ++c) {
      t[c] = convert_lanes::float_to_bf16(e4m3_to_float(static_cast<std::uint8_t>(c)));
    }
    return t;
  }();
  return table.data();
}

// MXFP8 -> bf16 in 16-bit lanes, 32 elements (one block) per step. A scale byte s in [10, 246]
// keeps every product e4m3 * 2^(s-127) a normal fp32 (e4m3 magnitudes lie in [2^-9, 448]), so
// the product is exact and already a bf16 value: its bits are the bf16 bits of the E4M3
// magnitude (a 128-entry table) plus (s - 127) in the exponent field, with zero and NaN codes
// left as they are and the sign put back. Blocks with another scale take the general loop.
// Gives exactly the bits of dequantize_bf16_body (the tests compare every code and scale).
SW_TARGET_AVX512 void dequantize_bf16_avx512_table(const std::uint8_t* data,
                                                   const std::uint8_t* scales, std::uint16_t* out,
                                                   std::int64_t nblocks) {
  const std::uint16_t* table = e4m3_magnitude_to_bf16_table();
  const __m512i t0 = _mm512_load_si512(table), t1 = _mm512_load_si512(table + 32);
  const __m512i t2 = _mm512_load_si512(table + 64), t3 = _mm512_load_si512(table + 96);
  const __m512i magnitude_mask = _mm512_set1_epi16(0x7f), nan_code = _mm512_set1_epi16(0x7f);
  const __m512i upper_half = _mm512_set1_epi16(0x40), sign_mask = _mm512_set1_epi16(0x80);
  for (std::int64_t b = 0; b < nblocks; ++b) {
    const std::uint32_t s = scales[b];
    if (s < 10 || s > 246) {
      dequantize_bf16_body(data + b * kBlock, scales + b, out + b * kBlock, 1);
      continue;
    }
    const __m512i codes = _mm512_cvtepu8_epi16(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(data + b * kBlock)));
    const __m512i magnitude = _mm512_and_si512(codes, magnitude_mask);
    // Table lookup: two 64-entry permutes (index bits 0..5), picked by bit 6.
    const __m512i low = _mm512_permutex2var_epi16(t0, magnitude, t1);
    const __m512i high = _mm512_permutex2var_epi16(t2, magnitude, t3);
    __m512i bits = _mm512_mask_blend_epi16(_mm512_test_epi16_mask(codes, upper_half), low, high);
    // Scale the numbers (not zero, not NaN) by adding s - 127 to the exponent field.
    const __mmask32 numbers = _mm512_test_epi16_mask(codes, magnitude_mask) &
                              _mm512_cmpneq_epi16_mask(magnitude, nan_code);
    const __m512i exponent_step =
        _mm512_set1_epi16(static_cast<short>((static_cast<int>(s) - 127) * 128));
    bits = _mm512_mask_add_epi16(bits, numbers, bits, exponent_step);
    bits = _mm512_or_si512(bits, _mm512_slli_epi16(_mm512_and_si512(codes, sign_mask), 8));
    _mm512_storeu_si512(out + b * kBlock, bits);
  }
}

// The AVX2 quantize kernels (mxfp8_quantize_avx2.cpp), with this level's loops for the blocks
// they hand back.
void quantize_bf16_avx2_fast(const std::uint16_t* src, std::uint8_t* data, std::uint8_t* scales,
                             std::int64_t nblocks, Mxfp8ScaleRule rule) {
  quantize_bf16_avx2_lanes(src, data, scales, nblocks, rule, quantize_bf16_avx2);
}
void quantize_f32_avx2_fast(const float* src, std::uint8_t* data, std::uint8_t* scales,
                            std::int64_t nblocks, Mxfp8ScaleRule rule) {
  quantize_f32_avx2_lanes(src, data, scales, nblocks, rule, quantize_f32_avx2);
}

// bf16 bits of the E4M3 NaN code (magnitude 0x7F) as dequantize_bf16_body makes them.
std::uint16_t e4m3_nan_as_bf16() {
  static const std::uint16_t bits = convert_lanes::float_to_bf16(e4m3_to_float(kE4M3NaN));
  return bits;
}

// bf16 bits of 16 E4M3 codes none of which is subnormal, `bias` = (s - 7) << 7 for scale byte s.
SW_TARGET_AVX2 inline __m256i normal_codes_to_bf16_avx2(__m256i codes, __m256i magnitude,
                                                        __m256i bias, __m256i nan_bits) {
  __m256i bits = _mm256_add_epi16(_mm256_slli_epi16(magnitude, 4), bias);
  bits = _mm256_blendv_epi8(bits, nan_bits, _mm256_cmpeq_epi16(magnitude, _mm256_set1_epi16(0x7f)));
  bits = _mm256_andnot_si256(_mm256_cmpeq_epi16(magnitude, _mm256_setzero_si256()), bits);
  const __m256i sign = _mm256_and_si256(codes, _mm256_set1_epi16(0x80));
  return _mm256_or_si256(bits, _mm256_slli_epi16(sign, 8));
}

// MXFP8 -> bf16 in 16-bit lanes with AVX2, one block per step. For a scale byte s in [10, 246]
// (see dequantize_bf16_avx512_table) a normal E4M3 magnitude code c (exponent field >= 1) times
// 2^(s-127) is exactly the bf16 (c << 4) + ((s - 7) << 7): the code's 4 exponent bits and 3
// mantissa bits land in bf16's fields, rebiased by 120 + (s - 127). Zero and NaN codes are set
// apart; blocks with a subnormal code (rare: elements 2^15 below the block's largest) or
// another scale take the general loop. Gives exactly the bits of dequantize_bf16_body.
SW_TARGET_AVX2 void dequantize_bf16_avx2_lanes(const std::uint8_t* data, const std::uint8_t* scales,
                                               std::uint16_t* out, std::int64_t nblocks) {
  const __m256i magnitude_mask = _mm256_set1_epi16(0x7f);
  const __m256i eight = _mm256_set1_epi16(8), zero = _mm256_setzero_si256();
  const __m256i nan_bits = _mm256_set1_epi16(static_cast<short>(e4m3_nan_as_bf16()));
  for (std::int64_t b = 0; b < nblocks; ++b) {
    const std::uint32_t s = scales[b];
    __builtin_prefetch(data + b * kBlock + 1024);
    if (s < 10 || s > 246) {
      dequantize_bf16_body(data + b * kBlock, scales + b, out + b * kBlock, 1);
      continue;
    }
    const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(data + b * kBlock));
    const __m256i codes0 = _mm256_cvtepu8_epi16(_mm256_castsi256_si128(bytes));
    const __m256i codes1 = _mm256_cvtepu8_epi16(_mm256_extracti128_si256(bytes, 1));
    const __m256i magnitude0 = _mm256_and_si256(codes0, magnitude_mask);
    const __m256i magnitude1 = _mm256_and_si256(codes1, magnitude_mask);
    const __m256i subnormal =
        _mm256_or_si256(_mm256_andnot_si256(_mm256_cmpeq_epi16(magnitude0, zero),
                                            _mm256_cmpgt_epi16(eight, magnitude0)),
                        _mm256_andnot_si256(_mm256_cmpeq_epi16(magnitude1, zero),
                                            _mm256_cmpgt_epi16(eight, magnitude1)));
    if (!_mm256_testz_si256(subnormal, subnormal)) {
      dequantize_bf16_body(data + b * kBlock, scales + b, out + b * kBlock, 1);
      continue;
    }
    const __m256i bias = _mm256_set1_epi16(static_cast<short>((static_cast<int>(s) - 7) << 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + b * kBlock),
                        normal_codes_to_bf16_avx2(codes0, magnitude0, bias, nan_bits));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + b * kBlock + 16),
                        normal_codes_to_bf16_avx2(codes1, magnitude1, bias, nan_bits));
  }
}

// The AVX2 level with the 16-bit-lane bf16 kernels.
constexpr Kernels kKernels_avx2_lanes = {quantize_f32_avx2_fast,     quantize_bf16_avx2_fast,
                                         quantize_f16_avx2,          dequantize_f32_avx2,
                                         dequantize_bf16_avx2_lanes, dequantize_f16_avx2};

// The AVX-512 level: its own dequantize kernels, the AVX2 level's fp32 and bf16 quantize kernels.
// Measured on two AVX-512 hosts (a Zen 4 EPYC and an Intel Xeon), 512-bit quantize kernels (a
// hand-written one block per step for bf16, the compiler's for fp32) reached 0.40-0.65 of STREAM
// copy; with the AVX2 kernels, which work on several blocks at once, the Xeon reads 1.05 (bf16)
// and 0.95 (fp32). A level must not be slower than the one below it.
constexpr Kernels kKernels_avx512_lanes = {quantize_f32_avx2_fast,       quantize_bf16_avx2_fast,
                                           quantize_f16_avx512,          dequantize_f32_avx512,
                                           dequantize_bf16_avx512_table, dequantize_f16_avx512};
constexpr Kernels kKernels[kNumIsaLevels] = {kKernels_baseline, kKernels_avx2_lanes,
                                             kKernels_avx512_lanes};
#else
constexpr Kernels kKernels[kNumIsaLevels] = {kKernels_baseline, kKernels_avx2, kKernels_avx512};
#endif

}  // namespace

void quantize_f32(const float* src, std::uint8_t* data, std::uint8_t* scales, std::int64_t nblocks,
                  Mxfp8ScaleRule rule) {
  dispatch(kKernels).quantize_f32(src, data, scales, nblocks, rule);
}
void quantize_bf16(const std::uint16_t* src, std::uint8_t* data, std::uint8_t* scales,
                   std::int64_t nblocks, Mxfp8ScaleRule rule) {
  dispatch(kKernels).quantize_bf16(src, data, scales, nblocks, rule);
}
void quantize_f16(const std::uint16_t* src, std::uint8_t* data, std::uint8_t* scales,
                  std::int64_t nblocks, Mxfp8ScaleRule rule) {
  dispatch(kKernels).quantize_f16(src, data, scales, nblocks, rule);
}
void dequantize_f32(const std::uint8_t* data, const std::uint8_t* scales, float* out,
                    std::int64_t nblocks) {
  dispatch(kKernels).dequantize_f32(data, scales, out, nblocks);
}
void dequantize_bf16(const std::uint8_t* data, const std::uint8_t* scales, std::uint16_t* out,
                     std::int64_t nblocks) {
  dispatch(kKernels).dequantize_bf16(data, scales, out, nblocks);
}
void dequantize_f16(const std::uint8_t* data, const std::uint8_t* scales, std::uint16_t* out,
                    std::int64_t nblocks) {
  dispatch(kKernels).dequantize_f16(data, scales, out, nblocks);
}

}  // namespace shardwise::mxfp8_kernels
