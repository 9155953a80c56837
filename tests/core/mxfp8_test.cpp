#include "shardwise/core/mxfp8.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "shardwise/core/float_convert.hpp"

namespace shardwise {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// ---- Independent slow reference (double arithmetic, brute-force E4M3 rounding) ----

double ref_e4m3(unsigned code) {
  const int exponent = (code >> 3) & 0xf, mantissa = code & 7;
  if (exponent == 15 && mantissa == 7) return std::numeric_limits<double>::quiet_NaN();
  const double m = exponent == 0 ? std::ldexp(mantissa / 8.0, -6)
                                 : std::ldexp(1.0 + mantissa / 8.0, exponent - 7);
  return (code & 0x80u) ? -m : m;
}

// Nearest finite code of x's sign, ties to even; saturates to +-448.
unsigned ref_encode(double x) {
  const unsigned base = std::signbit(x) ? 0x80u : 0u;
  unsigned best = base;
  double best_distance = std::numeric_limits<double>::infinity();
  for (unsigned c = base; c < base + 0x7f; ++c) {
    const double d = std::fabs(x - ref_e4m3(c));
    if (d < best_distance || (d == best_distance && (c & 1u) == 0)) best = c, best_distance = d;
  }
  return best;
}

struct RefBlock {
  unsigned scale = 0;
  std::vector<unsigned> codes;
};

// The spec rules, written directly: ceil picks the smallest 2^e with amax <= 448 * 2^e, floor
// takes floor(log2(amax)) - 8; both clamp e to [-127, 127].
RefBlock ref_quantize_block(const std::vector<float>& x, Mxfp8ScaleRule rule) {
  RefBlock out;
  double amax = 0;
  bool special = false;
  for (float v : x) {
    if (!std::isfinite(v)) {
      special = true;
      continue;
    }
    amax = std::max(amax, std::fabs(static_cast<double>(v)));
  }
  if (rule == Mxfp8ScaleRule::kFloor && special) {
    out.scale = 0xff;
    for (float v : x) out.codes.push_back(std::signbit(v) ? 0xffu : 0x7fu);
    return out;
  }
  int e = -127;
  if (amax > 0) {
    if (rule == Mxfp8ScaleRule::kCeil) {
      e = -200;
      while (std::ldexp(448.0, e) < amax) ++e;
    } else {
      e = static_cast<int>(std::floor(std::log2(amax)));
      while (std::ldexp(1.0, e) > amax) --e;  // guard log2 rounding
      while (std::ldexp(1.0, e + 1) <= amax) ++e;
      e -= 8;
    }
  }
  e = std::clamp(e, -127, 127);
  out.scale = static_cast<unsigned>(e + 127);
  for (float v : x) {
    if (!std::isfinite(v)) {
      out.codes.push_back(std::signbit(v) ? 0xffu : 0x7fu);
    } else {
      out.codes.push_back(ref_encode(std::ldexp(static_cast<double>(v), -e)));
    }
  }
  return out;
}

// Checks a row-major-scale MXFP8 tensor of an fp32 [rows, cols] input against the reference.
void expect_matches_reference(const std::vector<float>& x, std::int64_t rows, std::int64_t cols,
                              const Mxfp8Tensor& q, Mxfp8ScaleRule rule) {
  const std::int64_t bpr = (cols + 31) / 32;
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t b = 0; b < bpr; ++b) {
      const std::int64_t c0 = b * 32, c1 = std::min(cols, c0 + 32);
      std::vector<float> block(x.begin() + r * cols + c0, x.begin() + r * cols + c1);
      const RefBlock want = ref_quantize_block(block, rule);
      ASSERT_EQ(q.scale[mxfp8_scale_offset(q.layout, r, b, bpr)], want.scale)
          << "row " << r << " block " << b;
      for (std::int64_t c = c0; c < c1; ++c) {
        ASSERT_EQ(q.data[r * cols + c], want.codes[c - c0])
            << "row " << r << " col " << c << " x=" << x[r * cols + c];
      }
    }
  }
}

Mxfp8Tensor quantize_f32(std::vector<float>& x, std::int64_t rows, std::int64_t cols,
                         Mxfp8ScaleRule rule, Mxfp8ScaleLayout layout = Mxfp8ScaleLayout::kRowMajor,
                         int threads = 0) {
  return quantize_mxfp8({x.data(), rows * cols, DType::kFloat32}, rows, cols,
                        {rule, layout, threads});
}

// Random data whose blocks span a wide range of magnitudes (incl. fp32 subnormals and 1e38).
std::vector<float> random_matrix(std::int64_t rows, std::int64_t cols, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-140, 120);
  std::vector<float> x(static_cast<std::size_t>(rows * cols));
  // A few outliers (up to 2^+-20) so blocks are not all Gaussian.
  std::uniform_int_distribution<int> outlier(-20, 20);
  for (std::int64_t i = 0; i < rows * cols; ++i) {
    x[static_cast<std::size_t>(i)] = std::ldexp(normal(gen), i % 97 == 0 ? outlier(gen) : 0);
  }
  // Give each block its own magnitude.
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c0 = 0; c0 < cols; c0 += 32) {
      const int e = exponent(gen);
      for (std::int64_t c = c0; c < std::min(cols, c0 + 32); ++c) {
        float& v = x[static_cast<std::size_t>(r * cols + c)];
        v = std::ldexp(v, e);
        if (!std::isfinite(v)) v = 1.0f;
      }
    }
  }
  return x;
}

const Mxfp8ScaleRule kRules[] = {Mxfp8ScaleRule::kCeil, Mxfp8ScaleRule::kFloor};

TEST(Mxfp8Quantize, RandomBlocksMatchReferenceForBothRules) {
  for (auto rule : kRules) {
    std::vector<float> x = random_matrix(37, 96, 11);
    const Mxfp8Tensor q = quantize_f32(x, 37, 96, rule);
    EXPECT_EQ(q.rule, rule);
    expect_matches_reference(x, 37, 96, q, rule);
  }
}

TEST(Mxfp8Quantize, Bf16AndFp16InputsMatchReferenceOnTheirFp32Values) {
  std::vector<float> x = random_matrix(9, 160, 5);
  for (auto rule : kRules) {
    std::vector<bf16_bits> b(x.size());
    std::vector<float> bx(x.size());
    std::vector<fp16_bits> h(x.size());
    std::vector<float> hx(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
      b[i] = float_to_bf16(x[i]);
      bx[i] = bf16_to_float(b[i]);
      // fp16 has a narrow range: rescale into it (subnormals and overflow included).
      h[i] = float_to_fp16(std::ldexp(x[i], -std::max(-30, std::ilogb(x[i] == 0 ? 1 : x[i]))) *
                           static_cast<float>(1 + i % 7) * (i % 5 == 0 ? 1e-6f : 1.0f));
      hx[i] = fp16_to_float(h[i]);
    }
    const Mxfp8Tensor qb = quantize_mxfp8({b.data(), 9 * 160, DType::kBFloat16}, 9, 160, {rule});
    expect_matches_reference(bx, 9, 160, qb, rule);
    const Mxfp8Tensor qh = quantize_mxfp8({h.data(), 9 * 160, DType::kFloat16}, 9, 160, {rule});
    expect_matches_reference(hx, 9, 160, qh, rule);
  }
}

TEST(Mxfp8Quantize, AllZeroBlockHasScaleByteZeroAndZeroData) {
  for (auto rule : kRules) {
    std::vector<float> x(64, 0.0f);
    for (int i = 32; i < 64; i += 2) x[i] = -0.0f;
    const Mxfp8Tensor q = quantize_f32(x, 1, 64, rule);
    EXPECT_EQ(q.scale[0], 0);
    EXPECT_EQ(q.scale[1], 0);
    for (int i = 0; i < 64; ++i) EXPECT_EQ(q.data[i], std::signbit(x[i]) ? 0x80 : 0x00) << i;
    const std::vector<float> back = dequantize_mxfp8_to_float(q);
    for (int i = 0; i < 64; ++i) {
      EXPECT_EQ(back[i], 0.0f);
      EXPECT_EQ(std::signbit(back[i]), std::signbit(x[i]));  // -0 round-trips
    }
  }
}

// amax at a power of two, at 448 * 2^k, one ulp either side, and at 1.75 * 2^k (the ceil
// rule's mantissa threshold): the scale bytes are checked by hand and against the reference.
TEST(Mxfp8Quantize, ScaleAtPowersOfTwoAnd448TimesPowersOfTwo) {
  struct Case {
    float amax;
    unsigned ceil_byte;
    unsigned floor_byte;
  };
  const float up = std::nextafter(448.0f, kInf), down = std::nextafter(448.0f, 0.0f);
  const Case cases[] = {
      {448.0f, 127, 127},                       // ceil: 448/448 = 2^0; floor: 2^8 -> e = 0
      {up, 128, 127},                           // just above 448: ceil needs 2^1
      {down, 127, 127},                         //
      {std::ldexp(448.0f, 10), 137, 137},       // 448 * 2^10
      {std::ldexp(up, 10), 138, 137},           //
      {std::ldexp(448.0f, -20), 107, 107},      //
      {1.0f, 119, 119},                         // 2^0: ceil 2^-8 (1/2^-8 = 256 <= 448); floor 0-8
      {std::nextafter(1.0f, 2.0f), 119, 119},   // just above a power of two
      {std::nextafter(1.0f, 0.0f), 119, 118},   // just below: floor drops an exponent
      {std::ldexp(1.0f, 100), 219, 219},        //
      {std::ldexp(1.0f, -126), 0, 0},           // clamps to 2^-127
      {std::ldexp(1.0f, -110), 9, 9},           // 2^-110: ceil 2^-118, floor 2^-118
      {1.75f, 119, 119},                        // 1.75/2^-8 = 448 exactly
      {std::nextafter(1.75f, 2.0f), 120, 119},  // ceil steps up just past 1.75
  };
  for (const Case& c : cases) {
    std::vector<float> x(32);
    for (int i = 0; i < 32; ++i) x[i] = c.amax * static_cast<float>(i) / 31.0f * (i % 2 ? -1 : 1);
    x[31] = c.amax;
    for (auto rule : kRules) {
      const Mxfp8Tensor q = quantize_f32(x, 1, 32, rule);
      const unsigned want = rule == Mxfp8ScaleRule::kCeil ? c.ceil_byte : c.floor_byte;
      EXPECT_EQ(q.scale[0], want) << "amax=" << c.amax << " rule=" << static_cast<int>(rule);
      expect_matches_reference(x, 1, 32, q, rule);
    }
  }
  // Ceil never saturates: the block max maps to at most 448 (code 0x7E) ...
  std::vector<float> top = {std::ldexp(448.0f, 3)};
  top.resize(32, 0.0f);
  EXPECT_EQ(quantize_f32(top, 1, 32, Mxfp8ScaleRule::kCeil).data[0], 0x7e);
  // ... while floor saturates the top of [448, 512) after scaling: 1.99 * 2^k -> 448.
  std::vector<float> sat = {1.99f * 64.0f};
  sat.resize(32, 0.0f);
  const Mxfp8Tensor qs = quantize_f32(sat, 1, 32, Mxfp8ScaleRule::kFloor);
  EXPECT_EQ(qs.scale[0], 127 + 6 - 8);
  EXPECT_EQ(qs.data[0], 0x7e);
}

TEST(Mxfp8Quantize, SubnormalInputsUseTheClampedScale) {
  for (auto rule : kRules) {
    std::vector<float> x(32);
    for (int i = 0; i < 32; ++i)
      x[i] = std::bit_cast<float>(0x00012345u * (i + 1)) * (i % 3 ? 1 : -1);
    x[5] = std::numeric_limits<float>::denorm_min();
    const Mxfp8Tensor q = quantize_f32(x, 1, 32, rule);
    EXPECT_EQ(q.scale[0], 0);  // 2^-127
    expect_matches_reference(x, 1, 32, q, rule);
    // x * 2^127 is in E4M3 range, so the values survive (not all flushed to zero).
    int nonzero = 0;
    for (int i = 0; i < 32; ++i) nonzero += (q.data[i] & 0x7f) != 0;
    EXPECT_GT(nonzero, 20);
  }
}

TEST(Mxfp8Quantize, NaNAndInfFollowTheRuleOfEachScheme) {
  std::vector<float> x(64);
  for (int i = 0; i < 64; ++i) x[i] = 0.25f * static_cast<float>(i - 20);
  x[3] = kNaN;
  x[7] = -kInf;
  x[40] = kInf;  // second block: Inf only
  // Ceil: per element; the scale comes from the finite elements.
  const Mxfp8Tensor qc = quantize_f32(x, 1, 64, Mxfp8ScaleRule::kCeil);
  expect_matches_reference(x, 1, 64, qc, Mxfp8ScaleRule::kCeil);
  EXPECT_EQ(qc.data[3], 0x7f);
  EXPECT_EQ(qc.data[7], 0xff);
  EXPECT_EQ(qc.data[40], 0x7f);
  EXPECT_NE(qc.scale[0], 0xff);
  const std::vector<float> back = dequantize_mxfp8_to_float(qc);
  for (int i = 0; i < 64; ++i) {
    EXPECT_EQ(std::isnan(back[i]), i == 3 || i == 7 || i == 40) << i;
  }
  EXPECT_EQ(back[8], x[8]);  // small integers * 0.25 are exact in E4M3 at this scale
  // Floor (OCP): a NaN/Inf anywhere makes the block scale NaN and every element NaN.
  const Mxfp8Tensor qf = quantize_f32(x, 1, 64, Mxfp8ScaleRule::kFloor);
  expect_matches_reference(x, 1, 64, qf, Mxfp8ScaleRule::kFloor);
  EXPECT_EQ(qf.scale[0], 0xff);
  EXPECT_EQ(qf.scale[1], 0xff);
  for (float v : dequantize_mxfp8_to_float(qf)) EXPECT_TRUE(std::isnan(v));
  // A block of only NaN under ceil: scale byte 0, all elements NaN.
  std::vector<float> all_nan(32, -kNaN);
  const Mxfp8Tensor qn = quantize_f32(all_nan, 1, 32, Mxfp8ScaleRule::kCeil);
  EXPECT_EQ(qn.scale[0], 0);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(qn.data[i], 0xff);
}

TEST(Mxfp8Quantize, PartialLastBlock) {
  const Mxfp8Geometry g = mxfp8_geometry(5, 70, Mxfp8ScaleLayout::kRowMajor);
  EXPECT_EQ(g.blocks_per_row, 3);
  EXPECT_EQ(g.last_block_size, 6);
  EXPECT_TRUE(g.has_partial_block());
  EXPECT_EQ(g.scale_bytes, 15);
  EXPECT_FALSE(mxfp8_geometry(5, 64, Mxfp8ScaleLayout::kRowMajor).has_partial_block());
  for (auto rule : kRules) {
    std::vector<float> x = random_matrix(5, 70, 3);
    x[69] = 1000.0f;  // the partial block's own amax drives its scale
    const Mxfp8Tensor q = quantize_f32(x, 5, 70, rule);
    EXPECT_EQ(q.data.size(), 350u);
    expect_matches_reference(x, 5, 70, q, rule);
    // Single short row (only a partial block).
    std::vector<float> y = {1.0f, -3.0f, 0.5f};
    const Mxfp8Tensor qy = quantize_f32(y, 1, 3, rule);
    expect_matches_reference(y, 1, 3, qy, rule);
    EXPECT_EQ(dequantize_mxfp8_to_float(qy), y);
  }
}

TEST(Mxfp8Layout, SwizzledOffsetsMatchHandComputedIndices) {
  // 130 rows x 6 blocks per row: 2 tile-rows x 2 tiles per tile-row, 2048 bytes.
  const auto L = Mxfp8ScaleLayout::kSwizzled128x4;
  EXPECT_EQ(mxfp8_geometry(130, 6 * 32, L).scale_bytes, 256 * 8);
  EXPECT_EQ(mxfp8_scale_offset(L, 0, 0, 6), 0);
  EXPECT_EQ(mxfp8_scale_offset(L, 0, 3, 6), 3);
  EXPECT_EQ(mxfp8_scale_offset(L, 1, 0, 6), 16);
  EXPECT_EQ(mxfp8_scale_offset(L, 31, 0, 6), 496);
  EXPECT_EQ(mxfp8_scale_offset(L, 32, 0, 6), 4);
  EXPECT_EQ(mxfp8_scale_offset(L, 33, 1, 6), 21);
  EXPECT_EQ(mxfp8_scale_offset(L, 96, 2, 6), 14);
  EXPECT_EQ(mxfp8_scale_offset(L, 127, 3, 6), 511);
  EXPECT_EQ(mxfp8_scale_offset(L, 0, 4, 6), 512);
  EXPECT_EQ(mxfp8_scale_offset(L, 5, 5, 6), 593);
  EXPECT_EQ(mxfp8_scale_offset(L, 128, 0, 6), 1024);
  EXPECT_EQ(mxfp8_scale_offset(L, 129, 5, 6), 1553);
  EXPECT_EQ(mxfp8_scale_offset(Mxfp8ScaleLayout::kRowMajor, 129, 5, 6), 779);
  // The map is a bijection of the padded [256, 8] scale grid onto [0, 2048).
  std::set<std::int64_t> seen;
  for (std::int64_t r = 0; r < 256; ++r)
    for (std::int64_t c = 0; c < 8; ++c) seen.insert(mxfp8_scale_offset(L, r, c, 6));
  EXPECT_EQ(seen.size(), 2048u);
  EXPECT_EQ(*seen.rbegin(), 2047);
}

TEST(Mxfp8Layout, SwizzledScalesArePermutedRowMajorScalesWithZeroPadding) {
  std::vector<float> x = random_matrix(130, 200, 17);  // 7 blocks per row (last partial)
  const Mxfp8Tensor rm = quantize_f32(x, 130, 200, Mxfp8ScaleRule::kCeil);
  const Mxfp8Tensor sw =
      quantize_f32(x, 130, 200, Mxfp8ScaleRule::kCeil, Mxfp8ScaleLayout::kSwizzled128x4);
  EXPECT_EQ(sw.data, rm.data);
  ASSERT_EQ(sw.scale.size(), 256u * 8u);
  std::vector<bool> used(sw.scale.size(), false);
  for (std::int64_t r = 0; r < 130; ++r) {
    for (std::int64_t b = 0; b < 7; ++b) {
      const auto off = mxfp8_scale_offset(Mxfp8ScaleLayout::kSwizzled128x4, r, b, 7);
      EXPECT_EQ(sw.scale[off], rm.scale[r * 7 + b]);
      used[off] = true;
    }
  }
  for (std::size_t i = 0; i < used.size(); ++i) {
    if (!used[i]) {
      EXPECT_EQ(sw.scale[i], 0) << i;
    }
  }
  EXPECT_EQ(dequantize_mxfp8_to_float(sw), dequantize_mxfp8_to_float(rm));
}

// |dq - x| <= 2^-4 |x| for every element whose scaled value is an E4M3 normal (|x| >= 2^-6 *
// scale): RNE to 3 mantissa bits errs by at most half an ulp = 2^-4 * 2^floor(log2|x/scale|).
// Below that (E4M3 subnormals) the error is at most half the spacing: 2^-10 * scale. Under the
// ceil rule scale <= amax / 224, so every |x| >= amax / 14336 gets the 2^-4 relative bound.
TEST(Mxfp8RoundTrip, CeilRuleErrorWithinE4M3Bound) {
  std::vector<float> x = random_matrix(64, 256, 23);
  const Mxfp8Tensor q = quantize_f32(x, 64, 256, Mxfp8ScaleRule::kCeil);
  const std::vector<float> back = dequantize_mxfp8_to_float(q);
  double worst_relative = 0;
  for (std::int64_t r = 0; r < 64; ++r) {
    for (std::int64_t c = 0; c < 256; ++c) {
      const double v = x[r * 256 + c], d = back[r * 256 + c];
      const double scale = std::ldexp(1.0, q.scale[r * 8 + c / 32] - 127);
      const double err = std::fabs(d - v);
      if (std::fabs(v) >= std::ldexp(scale, -6)) {
        ASSERT_LE(err, std::ldexp(std::fabs(v), -4)) << r << "," << c << " x=" << v;
        worst_relative = std::max(worst_relative, err / std::fabs(v));
      } else {
        ASSERT_LE(err, std::ldexp(scale, -10)) << r << "," << c << " x=" << v;
      }
    }
  }
  // The bound is tight: something comes close to it (a truncating codec would exceed it).
  EXPECT_GT(worst_relative, 0.055);
}

TEST(Mxfp8RoundTrip, DequantizeToBf16AndFp16RoundsTheFp32Result) {
  std::vector<float> x = random_matrix(8, 96, 29);
  const Mxfp8Tensor q = quantize_f32(x, 8, 96, Mxfp8ScaleRule::kCeil);
  const std::vector<float> f = dequantize_mxfp8_to_float(q);
  std::vector<bf16_bits> b(f.size());
  std::vector<fp16_bits> h(f.size());
  dequantize_mxfp8_into(q.view(), {b.data(), 8 * 96, DType::kBFloat16});
  dequantize_mxfp8_into(q.view(), {h.data(), 8 * 96, DType::kFloat16});
  for (std::size_t i = 0; i < f.size(); ++i) {
    EXPECT_EQ(b[i], float_to_bf16(f[i])) << i;
    EXPECT_EQ(h[i], float_to_fp16(f[i])) << i;
  }
}

TEST(Mxfp8Quantize, ThreadCountDoesNotChangeTheBytes) {
  std::vector<float> x = random_matrix(300, 1000, 31);  // partial last block, many work items
  for (auto layout : {Mxfp8ScaleLayout::kRowMajor, Mxfp8ScaleLayout::kSwizzled128x4}) {
    const Mxfp8Tensor one = quantize_f32(x, 300, 1000, Mxfp8ScaleRule::kCeil, layout, 1);
    const Mxfp8Tensor two = quantize_f32(x, 300, 1000, Mxfp8ScaleRule::kCeil, layout, 2);
    const Mxfp8Tensor three = quantize_f32(x, 300, 1000, Mxfp8ScaleRule::kCeil, layout, 3);
    EXPECT_EQ(one.data, two.data);
    EXPECT_EQ(one.scale, two.scale);
    EXPECT_EQ(one.data, three.data);
    EXPECT_EQ(one.scale, three.scale);
    EXPECT_EQ(dequantize_mxfp8_to_float(one, 1), dequantize_mxfp8_to_float(one, 2));
  }
  // One long row is split across threads too.
  std::vector<float> row = random_matrix(1, 70000, 37);
  EXPECT_EQ(
      quantize_f32(row, 1, 70000, Mxfp8ScaleRule::kFloor, Mxfp8ScaleLayout::kRowMajor, 1).data,
      quantize_f32(row, 1, 70000, Mxfp8ScaleRule::kFloor, Mxfp8ScaleLayout::kRowMajor, 2).data);
}

// Quantizing four sub-rectangles into persistent storage gives the bytes of one whole-tensor
// quantize, and the storage addresses never change.
TEST(Mxfp8QuantizeInto, SubRectanglesAssembleTheWholeTensor) {
  const std::int64_t rows = 150, cols = 200;  // last block partial (200 = 6 * 32 + 8)
  std::vector<float> x = random_matrix(rows, cols, 41);
  for (auto layout : {Mxfp8ScaleLayout::kRowMajor, Mxfp8ScaleLayout::kSwizzled128x4}) {
    const Mxfp8Tensor whole = quantize_f32(x, rows, cols, Mxfp8ScaleRule::kCeil, layout);
    Mxfp8Tensor dst = Mxfp8Tensor::allocate(rows, cols, layout);
    const std::uint8_t* data_address = dst.data.data();
    const std::uint8_t* scale_address = dst.scale.data();
    for (auto [r0, r1] : {std::pair<std::int64_t, std::int64_t>{0, 70}, {70, 150}}) {
      for (auto [c0, c1] : {std::pair<std::int64_t, std::int64_t>{0, 128}, {128, 200}}) {
        std::vector<float> tile;
        for (std::int64_t r = r0; r < r1; ++r)
          tile.insert(tile.end(), x.begin() + r * cols + c0, x.begin() + r * cols + c1);
        quantize_mxfp8_into({tile.data(), (r1 - r0) * (c1 - c0), DType::kFloat32}, r1 - r0, c1 - c0,
                            dst.view(), r0, c0);
      }
    }
    EXPECT_EQ(dst.data, whole.data);
    EXPECT_EQ(dst.scale, whole.scale);
    EXPECT_EQ(dst.data.data(), data_address);
    EXPECT_EQ(dst.scale.data(), scale_address);
  }
}

template <typename E, typename F>
std::string error_of(F f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "<no error>";
}

TEST(Mxfp8QuantizeInto, RejectsBadArguments) {
  std::vector<float> x(64 * 4, 1.0f);
  Mxfp8Tensor dst = Mxfp8Tensor::allocate(4, 100);
  const TensorView v{x.data(), 64 * 4, DType::kFloat32};
  EXPECT_NE(error_of<InvalidArgument>([&] {
              quantize_mxfp8_into(v, 4, 64, dst.view(), 0, 16);
            }).find("col_offset 16"),
            std::string::npos);
  // 40 columns ending at 40 (not the row end 100) would cut a block.
  std::vector<float> y(40 * 4, 1.0f);
  EXPECT_NE(error_of<InvalidArgument>([&] {
              quantize_mxfp8_into({y.data(), 160, DType::kFloat32}, 4, 40, dst.view(), 0, 0);
            }).find("[0, 40)"),
            std::string::npos);
  // Ending at the row end is fine: cols [64, 100).
  std::vector<float> z(36 * 4, 1.0f);
  quantize_mxfp8_into({z.data(), 144, DType::kFloat32}, 4, 36, dst.view(), 0, 64);
  EXPECT_THROW(quantize_mxfp8_into(v, 4, 64, dst.view(), 1, 0), ShapeError);  // rows overflow
  EXPECT_THROW(quantize_mxfp8_into(v, 4, 63, dst.view()), ShapeError);        // numel mismatch
  EXPECT_THROW(quantize_mxfp8({x.data(), 64, DType::kInt32}, 1, 64), InvalidArgument);
  Mxfp8View small = dst.view();
  small.scale = small.scale.first(3);
  EXPECT_THROW(quantize_mxfp8_into(v, 4, 64, small), ShapeError);
  std::vector<std::int32_t> out(400);
  EXPECT_THROW(dequantize_mxfp8_into(dst.view(), {out.data(), 400, DType::kInt32}),
               InvalidArgument);
  // A shape whose byte count wraps (2^69 to 0) passed every size check and crashed.
  const std::int64_t huge_rows = std::int64_t{1} << 40, huge_cols = std::int64_t{1} << 29;
  EXPECT_THROW(mxfp8_geometry(huge_rows, huge_cols, Mxfp8ScaleLayout::kRowMajor), ShapeError);
  EXPECT_THROW(quantize_mxfp8_into({x.data(), 0, DType::kFloat32}, huge_rows, huge_cols,
                                   Mxfp8View{{}, {}, huge_rows, huge_cols}),
               ShapeError);
  // Views of GPU memory are refused by the host codec (it read them as host memory).
  const TensorView on_gpu{x.data(), 64 * 4, DType::kFloat32, /*device=*/0};
  EXPECT_NE(error_of<InvalidArgument>([&] {
              quantize_mxfp8_into(on_gpu, 4, 64, dst.view(), 0, 0);
            }).find("CUDA device 0"),
            std::string::npos);
  std::vector<float> back(400);
  EXPECT_THROW(dequantize_mxfp8_into(dst.view(), {back.data(), 400, DType::kFloat32, 0}),
               InvalidArgument);
}

TEST(Mxfp8ScaleSlice, MapsAlignedDataSlicesToScaleSlices) {
  const IndexRange a[] = {{0, 4}, {64, 128}};
  EXPECT_EQ(scale_slice_from_data_slice(a, 256), (std::vector<IndexRange>{{0, 4}, {2, 4}}));
  const IndexRange b[] = {{2, 3}, {5, 9}, {0, 256}};
  EXPECT_EQ(scale_slice_from_data_slice(b, 256), (std::vector<IndexRange>{{2, 3}, {5, 9}, {0, 8}}));
  // A slice that ends at a partial last block: [64, 70) of 70 -> scale block [2, 3).
  const IndexRange c[] = {{0, 1}, {64, 70}};
  EXPECT_EQ(scale_slice_from_data_slice(c, 70), (std::vector<IndexRange>{{0, 1}, {2, 3}}));
  const IndexRange d[] = {{0, 16}};
  EXPECT_EQ(scale_slice_from_data_slice(d, 64, 16), (std::vector<IndexRange>{{0, 1}}));
}

TEST(Mxfp8ScaleSlice, RejectsUnalignedOrOutOfRangeBounds) {
  const IndexRange start[] = {{0, 4}, {16, 64}};
  EXPECT_NE(
      error_of<InvalidArgument>([&] { scale_slice_from_data_slice(start, 256); }).find("[16, 64)"),
      std::string::npos);
  const IndexRange stop[] = {{0, 4}, {0, 40}};
  EXPECT_NE(
      error_of<InvalidArgument>([&] { scale_slice_from_data_slice(stop, 70); }).find("[0, 40)"),
      std::string::npos);
  const IndexRange outside[] = {{0, 288}};
  EXPECT_THROW(scale_slice_from_data_slice(outside, 256), InvalidArgument);
  EXPECT_THROW(scale_slice_from_data_slice({}, 256), InvalidArgument);
}

}  // namespace
}  // namespace shardwise
