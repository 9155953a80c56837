// MXFP8 quantize with AVX2 intrinsics, for bf16 and fp32 inputs. Blocks go in groups of 8:
//  1. every block's amax: the block's lanes are folded into one vector per block, then the 8
//     vectors are reduced together by interleave + max steps, so lane j of the result is the
//     amax of block j (no horizontal reduction per block, no trip through a general register);
//  2. the 8 scale bytes and per-block constants from that vector, plus a mask of the blocks the
//     fast path does not cover (they go to the general loop, which writes their bytes itself);
//  3. the codes of each covered block.
// Every step gives the bytes of the scalar codec (fp8.hpp, the scale rules of mxfp8_kernels.cpp),
// mostly by the same integer / float arithmetic (the fp32 element encoding takes a shorter route,
// see encode_f32_lanes); the ISA-level tests compare them.
#include "mxfp8_quantize_avx2.hpp"

#if SW_HAVE_ISA_LEVELS

#include <immintrin.h>

#include <cstring>

#include "mxfp8_kernels.hpp"
#include "shardwise/core/fp8.hpp"

namespace shardwise::mxfp8_kernels {
namespace {

constexpr int kGroup = 8;

// ---- bf16: 16 elements per vector, in 16-bit lanes ----

SW_TARGET_AVX2 inline __m256i max_unpack16(__m256i a, __m256i b) {
  return _mm256_max_epu16(_mm256_unpacklo_epi16(a, b), _mm256_unpackhi_epi16(a, b));
}
SW_TARGET_AVX2 inline __m256i max_unpack32(__m256i a, __m256i b) {
  return _mm256_max_epu16(_mm256_unpacklo_epi32(a, b), _mm256_unpackhi_epi32(a, b));
}
SW_TARGET_AVX2 inline __m256i max_unpack64(__m256i a, __m256i b) {
  return _mm256_max_epu16(_mm256_unpacklo_epi64(a, b), _mm256_unpackhi_epi64(a, b));
}

// Lane j = the largest of the 16 lanes of v[j]. Each step halves the lanes per vector and
// doubles the vectors per lane group: after the 16-, 32- and 64-bit interleaves every 128-bit
// half holds one partial maximum of each of the 8 vectors, in order.
SW_TARGET_AVX2 inline __m128i lane_max_u16(const __m256i (&v)[kGroup]) {
  const __m256i m0123 = max_unpack32(max_unpack16(v[0], v[1]), max_unpack16(v[2], v[3]));
  const __m256i m4567 = max_unpack32(max_unpack16(v[4], v[5]), max_unpack16(v[6], v[7]));
  const __m256i m = max_unpack64(m0123, m4567);
  return _mm_max_epu16(_mm256_castsi256_si128(m), _mm256_extracti128_si256(m, 1));
}

// Per-block constants of a bf16 group. With amax = E << 7 | m (bf16 bits) the biased scale
// exponent is E - 8 (kFloor) or E - 8 + (m > 0x60) (kCeil), i.e. ((amax + 0x1f) >> 7) - 8: the
// rules of scale_biased_exponent. The scale is 2^k, k = biased - 127.
struct Bf16Group {
  alignas(16) std::uint16_t threshold[kGroup];  // ((k + 120) << 7) - 7, see encode_bf16_block
  alignas(16) std::uint8_t scale[16];
  unsigned covered = 0;  // bit j: block j takes the fast path
};

template <Mxfp8ScaleRule kRule>
SW_TARGET_AVX2 inline void bf16_group_constants(__m128i amax, Bf16Group& g) {
  const __m128i rounded =
      kRule == Mxfp8ScaleRule::kCeil ? _mm_add_epi16(amax, _mm_set1_epi16(0x1f)) : amax;
  const __m128i field = _mm_and_si128(rounded, _mm_set1_epi16(0x7f80));  // E << 7
  const __m128i biased = _mm_subs_epu16(_mm_srli_epi16(rounded, 7), _mm_set1_epi16(8));
  _mm_store_si128(reinterpret_cast<__m128i*>(g.scale), _mm_packus_epi16(biased, biased));
  // (k + 120) << 7 = (E - 15) << 7.
  _mm_store_si128(reinterpret_cast<__m128i*>(g.threshold),
                  _mm_sub_epi16(field, _mm_set1_epi16(15 * 128 + 7)));
  // Covered: scale byte >= 11 (E >= 19; below, bf16 subnormals could round to nonzero codes)
  // and no NaN / Inf (amax < 0x7f80; kCeil keeps them out of amax, kFloor makes the block NaN).
  const __m128i covered = _mm_and_si128(_mm_cmpgt_epi16(field, _mm_set1_epi16(19 * 128 - 1)),
                                        _mm_cmpgt_epi16(_mm_set1_epi16(0x7f80), amax));
  g.covered = static_cast<unsigned>(_mm_movemask_epi8(_mm_packs_epi16(covered, covered))) & 0xffu;
}

// E4M3 magnitude codes of 16 bf16 magnitudes `abs` that are zero or at least 2^-6 * scale
// (normal codes). x / 2^k has exponent field e - k - 120 in E4M3 terms, so abs - ((k + 120) << 7)
// is the E4M3 code with 4 extra mantissa bits, rounded to nearest even by adding 7 plus the
// lowest kept bit (bit 4; the subtracted multiple of 128 leaves it as in abs) and shifting.
// `threshold` holds ((k + 120) << 7) - 7; the saturating subtract sends zeros to code 0.
template <Mxfp8ScaleRule kRule>
SW_TARGET_AVX2 inline __m256i encode_bf16_normal(__m256i abs, __m256i threshold) {
  const __m256i odd = _mm256_and_si256(_mm256_srli_epi16(abs, 4), _mm256_set1_epi16(1));
  __m256i code = _mm256_srli_epi16(_mm256_subs_epu16(_mm256_add_epi16(abs, odd), threshold), 4);
  // kCeil: amax / scale <= 448, so no code passes 0x7E. kFloor: the block top may saturate.
  if constexpr (kRule == Mxfp8ScaleRule::kFloor) {
    code = _mm256_min_epu16(code, _mm256_set1_epi16(kE4M3MaxCode));
  }
  return code;
}

// Writes the 32 codes of the covered bf16 block at x; false (nothing written) when the block has
// an element in [2^-10, 2^-6) * scale, an E4M3 subnormal (or a tie rounding to 0) that
// encode_bf16_normal does not handle. Elements below 2^-10 * scale (abs < (k + 117) << 7) are
// code 0 either way. Rare in real data (2^14 below the block's largest).
template <Mxfp8ScaleRule kRule>
SW_TARGET_AVX2 inline bool encode_bf16_block(const std::uint16_t* x, std::uint16_t threshold,
                                             std::uint8_t* out) {
  const __m256i thr = _mm256_set1_epi16(static_cast<short>(threshold));
  const __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x));
  const __m256i x1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 16));
  const __m256i abs_mask = _mm256_set1_epi16(0x7fff);
  const __m256i abs0 = _mm256_and_si256(x0, abs_mask), abs1 = _mm256_and_si256(x1, abs_mask);
  // (k + 117) << 7 = threshold - 377; lanes within 512 above it are the subnormal binades.
  const __m256i low = _mm256_sub_epi16(thr, _mm256_set1_epi16(377));
  const __m256i nearest =
      _mm256_min_epu16(_mm256_sub_epi16(abs0, low), _mm256_sub_epi16(abs1, low));
  const __m256i subnormal = _mm256_subs_epu16(_mm256_set1_epi16(512), nearest);
  if (!_mm256_testz_si256(subnormal, subnormal)) return false;
  const __m256i codes = _mm256_packus_epi16(encode_bf16_normal<kRule>(abs0, thr),
                                            encode_bf16_normal<kRule>(abs1, thr));
  // Signed saturation keeps each element's sign in bit 7 of its byte.
  const __m256i signs = _mm256_and_si256(_mm256_packs_epi16(x0, x1), _mm256_set1_epi8(-128));
  // Both packs interleave the 128-bit halves; one permute restores the element order.
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out),
                      _mm256_permute4x64_epi64(_mm256_or_si256(codes, signs), 0xd8));
  return true;
}

template <Mxfp8ScaleRule kRule>
SW_TARGET_AVX2 void quantize_bf16_groups(const std::uint16_t* src, std::uint8_t* data,
                                         std::uint8_t* scales, std::int64_t nblocks,
                                         QuantizeFn<std::uint16_t> general) {
  const __m256i abs_mask = _mm256_set1_epi16(0x7fff);
  for (std::int64_t b0 = 0; b0 < nblocks; b0 += kGroup) {
    const int n = nblocks - b0 < kGroup ? static_cast<int>(nblocks - b0) : kGroup;
    const std::uint16_t* x = src + b0 * kBlock;
    __m256i folded[kGroup];
    for (int j = 0; j < kGroup; ++j) {
      folded[j] = _mm256_setzero_si256();
      if (j >= n) continue;
      // 4 KiB ahead (one 64-byte line per block): ahead of the hardware prefetcher, which
      // stops at page boundaries.
      __builtin_prefetch(x + j * kBlock + 2048);
      const __m256i* p = reinterpret_cast<const __m256i*>(x + j * kBlock);
      folded[j] = _mm256_max_epu16(_mm256_and_si256(_mm256_loadu_si256(p), abs_mask),
                                   _mm256_and_si256(_mm256_loadu_si256(p + 1), abs_mask));
    }
    Bf16Group g;
    bf16_group_constants<kRule>(lane_max_u16(folded), g);
    if (n == kGroup) {
      std::memcpy(scales + b0, g.scale, kGroup);
    } else {
      std::memcpy(scales + b0, g.scale, static_cast<std::size_t>(n));
    }
    for (int j = 0; j < n; ++j) {
      const std::int64_t b = b0 + j;
      if (((g.covered >> j) & 1u) &&
          encode_bf16_block<kRule>(x + j * kBlock, g.threshold[j], data + b * kBlock)) {
        continue;
      }
      general(x + j * kBlock, data + b * kBlock, scales + b, 1, kRule);
    }
  }
}

// ---- fp32: 8 elements per vector ----

SW_TARGET_AVX2 inline __m256i max_unpack32_u32(__m256i a, __m256i b) {
  return _mm256_max_epu32(_mm256_unpacklo_epi32(a, b), _mm256_unpackhi_epi32(a, b));
}
SW_TARGET_AVX2 inline __m256i max_unpack64_u32(__m256i a, __m256i b) {
  return _mm256_max_epu32(_mm256_unpacklo_epi64(a, b), _mm256_unpackhi_epi64(a, b));
}

// Lane j = the largest of the 8 lanes of v[j] (as lane_max_u16, one step less, and the 128-bit
// halves joined by a cross-lane permute).
SW_TARGET_AVX2 inline __m256i lane_max_u32(const __m256i (&v)[kGroup]) {
  const __m256i m0123 =
      max_unpack64_u32(max_unpack32_u32(v[0], v[1]), max_unpack32_u32(v[2], v[3]));
  const __m256i m4567 =
      max_unpack64_u32(max_unpack32_u32(v[4], v[5]), max_unpack32_u32(v[6], v[7]));
  return _mm256_max_epu32(_mm256_permute2x128_si256(m0123, m4567, 0x20),
                          _mm256_permute2x128_si256(m0123, m4567, 0x31));
}

struct F32Group {
  alignas(32) float inverse_scale[kGroup];
  alignas(32) std::uint32_t scale[kGroup];
  unsigned covered = 0;  // bit j: block j takes the fast path
};

// Per-block constants of an fp32 group: scale_biased_exponent in 8 lanes (see bf16_group_constants;
// here the kCeil carry comes from adding 0x1fffff to the 23 mantissa bits).
template <Mxfp8ScaleRule kRule>
SW_TARGET_AVX2 inline void f32_group_constants(__m256i amax, F32Group& g) {
  const __m256i rounded =
      kRule == Mxfp8ScaleRule::kCeil ? _mm256_add_epi32(amax, _mm256_set1_epi32(0x1fffff)) : amax;
  // Finite amax gives at most 255 - 8 = 247, so no upper clamp.
  const __m256i biased =
      _mm256_max_epi32(_mm256_sub_epi32(_mm256_srli_epi32(rounded, 23), _mm256_set1_epi32(8)),
                       _mm256_setzero_si256());
  _mm256_store_si256(reinterpret_cast<__m256i*>(g.scale), biased);
  // 1 / 2^(biased - 127): fp32 exponent field 254 - biased.
  _mm256_store_si256(reinterpret_cast<__m256i*>(g.inverse_scale),
                     _mm256_slli_epi32(_mm256_sub_epi32(_mm256_set1_epi32(254), biased), 23));
  // NaN / Inf blocks go to the general loop (amax as signed numbers: all non-negative).
  const __m256i finite = _mm256_cmpgt_epi32(_mm256_set1_epi32(fp8_detail::kF32Inf), amax);
  g.covered = static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(finite)));
}

// E4M3 magnitude codes of 8 finite fp32 elements: the codes of encode_e4m3_magnitude on
// s = |x| * inverse_scale (the same product, so the same bits), with both of its ranges in one
// formula. With E = max(exponent field of s, 121) (121: the binade of 2^-6, E4M3's smallest
// normal), adding M = 2^(E - 127 + 20) rounds s in the FPU, RNE, to a multiple of 2^(E - 130):
// three mantissa bits in the normal range, the fixed step 2^-9 below it. The low bits of the sum
// then hold k = rounded s / 2^(E - 130) (8..16 normal, 0..8 subnormal), and the code is
// 8 (E - 121) + k: a rounding that carries k to 16 lands on the next binade's first code, and a
// subnormal rounding to 8 on the smallest normal, as E4M3 wants. Checked against the scalar
// codec for every finite fp32 pattern (the ISA-level tests compare the bytes on real blocks).
template <Mxfp8ScaleRule kRule>
SW_TARGET_AVX2 inline __m256i encode_f32_lanes(__m256 x, __m256 inverse_scale) {
  const __m256 abs = _mm256_and_ps(x, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff)));
  __m256i scaled = _mm256_castps_si256(_mm256_mul_ps(abs, inverse_scale));
  // kCeil: amax / scale <= 448, so the saturation of encode_e4m3_magnitude never binds.
  if constexpr (kRule == Mxfp8ScaleRule::kFloor) {
    scaled = _mm256_min_epi32(scaled, _mm256_set1_epi32(static_cast<int>(fp8_detail::kF32Of448)));
  }
  const __m256i exponent =
      _mm256_max_epi32(_mm256_and_si256(scaled, _mm256_set1_epi32(0x7f800000)),
                       _mm256_set1_epi32(static_cast<int>(fp8_detail::kF32OfMinNormal)));
  const __m256i magic = _mm256_add_epi32(exponent, _mm256_set1_epi32(20 << 23));  // bits of M
  const __m256i sum =
      _mm256_castps_si256(_mm256_add_ps(_mm256_castsi256_ps(scaled), _mm256_castsi256_ps(magic)));
  // code = (sum - magic) + 8 E - 968, and exponent >> 20 = 8 E.
  const __m256i offset = _mm256_sub_epi32(_mm256_srli_epi32(exponent, 20), exponent);
  return _mm256_sub_epi32(_mm256_add_epi32(sum, offset), _mm256_set1_epi32((20 << 23) + 968));
}

template <Mxfp8ScaleRule kRule>
SW_TARGET_AVX2 inline void encode_f32_block(const float* x, float inverse_scale,
                                            std::uint8_t* out) {
  const __m256 inv = _mm256_set1_ps(inverse_scale);
  const __m256 x0 = _mm256_loadu_ps(x), x1 = _mm256_loadu_ps(x + 8);
  const __m256 x2 = _mm256_loadu_ps(x + 16), x3 = _mm256_loadu_ps(x + 24);
  const __m256i codes = _mm256_packus_epi16(
      _mm256_packus_epi32(encode_f32_lanes<kRule>(x0, inv), encode_f32_lanes<kRule>(x1, inv)),
      _mm256_packus_epi32(encode_f32_lanes<kRule>(x2, inv), encode_f32_lanes<kRule>(x3, inv)));
  // Signed saturation keeps each element's sign in bit 7 of its byte.
  const __m256i signs = _mm256_and_si256(
      _mm256_packs_epi16(_mm256_packs_epi32(_mm256_castps_si256(x0), _mm256_castps_si256(x1)),
                         _mm256_packs_epi32(_mm256_castps_si256(x2), _mm256_castps_si256(x3))),
      _mm256_set1_epi8(-128));
  // The packs leave 4-byte groups in the order 0 2 4 6 | 1 3 5 7 of the block.
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out),
                      _mm256_permutevar8x32_epi32(_mm256_or_si256(codes, signs), order));
}

template <Mxfp8ScaleRule kRule>
SW_TARGET_AVX2 void quantize_f32_groups(const float* src, std::uint8_t* data, std::uint8_t* scales,
                                        std::int64_t nblocks, QuantizeFn<float> general) {
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff);
  for (std::int64_t b0 = 0; b0 < nblocks; b0 += kGroup) {
    const int n = nblocks - b0 < kGroup ? static_cast<int>(nblocks - b0) : kGroup;
    const float* x = src + b0 * kBlock;
    __m256i folded[kGroup];
    for (int j = 0; j < kGroup; ++j) {
      folded[j] = _mm256_setzero_si256();
      if (j >= n) continue;
      __builtin_prefetch(x + j * kBlock + 1024);  // 4 KiB ahead, as for bf16
      __builtin_prefetch(x + j * kBlock + 1024 + 16);
      const __m256i* p = reinterpret_cast<const __m256i*>(x + j * kBlock);
      const __m256i m01 = _mm256_max_epu32(_mm256_and_si256(_mm256_loadu_si256(p), abs_mask),
                                           _mm256_and_si256(_mm256_loadu_si256(p + 1), abs_mask));
      const __m256i m23 = _mm256_max_epu32(_mm256_and_si256(_mm256_loadu_si256(p + 2), abs_mask),
                                           _mm256_and_si256(_mm256_loadu_si256(p + 3), abs_mask));
      folded[j] = _mm256_max_epu32(m01, m23);
    }
    F32Group g;
    f32_group_constants<kRule>(lane_max_u32(folded), g);
    for (int j = 0; j < n; ++j) {
      const std::int64_t b = b0 + j;
      if ((g.covered >> j) & 1u) {
        scales[b] = static_cast<std::uint8_t>(g.scale[j]);
        encode_f32_block<kRule>(x + j * kBlock, g.inverse_scale[j], data + b * kBlock);
      } else {
        general(x + j * kBlock, data + b * kBlock, scales + b, 1, kRule);
      }
    }
  }
}

}  // namespace

void quantize_bf16_avx2_lanes(const std::uint16_t* src, std::uint8_t* data, std::uint8_t* scales,
                              std::int64_t nblocks, Mxfp8ScaleRule rule,
                              QuantizeFn<std::uint16_t> general) {
  if (rule == Mxfp8ScaleRule::kCeil) {
    quantize_bf16_groups<Mxfp8ScaleRule::kCeil>(src, data, scales, nblocks, general);
  } else {
    quantize_bf16_groups<Mxfp8ScaleRule::kFloor>(src, data, scales, nblocks, general);
  }
}

void quantize_f32_avx2_lanes(const float* src, std::uint8_t* data, std::uint8_t* scales,
                             std::int64_t nblocks, Mxfp8ScaleRule rule, QuantizeFn<float> general) {
  if (rule == Mxfp8ScaleRule::kCeil) {
    quantize_f32_groups<Mxfp8ScaleRule::kCeil>(src, data, scales, nblocks, general);
  } else {
    quantize_f32_groups<Mxfp8ScaleRule::kFloor>(src, data, scales, nblocks, general);
  }
}

}  // namespace shardwise::mxfp8_kernels

#endif  // SW_HAVE_ISA_LEVELS
