#include "shardwise/core/fp8.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace shardwise {
namespace {

// Independent E4M3FN decoder written from the format definition (in double).
double reference_e4m3(unsigned code) {
  const int sign = (code >> 7) & 1;
  const int exponent = (code >> 3) & 0xf;
  const int mantissa = code & 7;
  if (exponent == 15 && mantissa == 7) return std::numeric_limits<double>::quiet_NaN();
  const double magnitude = exponent == 0 ? std::ldexp(mantissa / 8.0, 1 - 7)
                                         : std::ldexp(1.0 + mantissa / 8.0, exponent - 7);
  return sign ? -magnitude : magnitude;
}

// Independent encoder: brute-force nearest of the finite codes with x's sign (so -tiny -> -0),
// ties to the even code. Saturation falls out: beyond 448 the nearest finite value is 448.
unsigned reference_encode(double x) {
  if (std::isnan(x)) return std::signbit(x) ? 0xffu : 0x7fu;
  const unsigned base = std::signbit(x) ? 0x80u : 0u;
  unsigned best = base;
  double best_distance = std::numeric_limits<double>::infinity();
  for (unsigned c = base; c < base + 0x7f; ++c) {
    const double d = std::fabs(x - reference_e4m3(c));
    if (d < best_distance || (d == best_distance && (c & 1u) == 0)) {
      best = c;
      best_distance = d;
    }
  }
  return best;
}

TEST(Fp8E4M3, EveryCodeDecodesLikeTheFormatDefinition) {
  for (unsigned c = 0; c < 256; ++c) {
    const float f = e4m3_to_float(static_cast<e4m3_bits>(c));
    const double want = reference_e4m3(c);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(f)) << std::hex << c;
      EXPECT_EQ(std::signbit(f), c >= 0x80) << std::hex << c;
    } else {
      EXPECT_EQ(static_cast<double>(f), want) << std::hex << c;
      EXPECT_EQ(std::signbit(f), c >= 0x80) << std::hex << c;  // -0 stays -0
    }
  }
  EXPECT_EQ(e4m3_to_float(0x7e), 448.0f);
  EXPECT_EQ(e4m3_to_float(0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(e4m3_to_float(0x08), std::ldexp(1.0f, -6));
}

TEST(Fp8E4M3, EveryCodeReencodesToItself) {
  for (unsigned c = 0; c < 256; ++c) {
    const float f = e4m3_to_float(static_cast<e4m3_bits>(c));
    EXPECT_EQ(float_to_e4m3(f), c) << std::hex << c;  // NaN codes come back as 0x7F / 0xFF
  }
}

// fp32 values at and around every rounding boundary: each finite value, each midpoint between
// neighbours, and up to 8 ulps either side of those, for both signs.
TEST(Fp8E4M3, RoundsToNearestEvenAtEveryBoundary) {
  std::vector<float> points;
  auto add_around = [&points](float v) {
    float lo = v, hi = v;
    points.push_back(v);
    for (int k = 0; k < 8; ++k) {
      lo = std::nextafter(lo, -1.0f);
      hi = std::nextafter(hi, 1000.0f);
      points.push_back(lo);
      points.push_back(hi);
    }
  };
  for (unsigned c = 0; c < 0x7e; ++c) {
    const double a = reference_e4m3(c), b = reference_e4m3(c + 1);
    add_around(static_cast<float>(a));
    add_around(static_cast<float>((a + b) / 2));  // exact: 5 significant bits
  }
  // Saturation: 448, the midpoint 464 to the non-existent 480, 480 and far beyond.
  for (float v : {448.0f, 456.0f, 464.0f, 480.0f, 512.0f, 1e6f, 3.0e38f}) add_around(v);
  points.push_back(std::numeric_limits<float>::max());
  points.push_back(std::numeric_limits<float>::denorm_min());
  points.push_back(std::ldexp(1.0f, -10));  // half of the smallest subnormal: ties to 0
  points.push_back(std::ldexp(3.0f, -10));  // 1.5 * 2^-9: ties to code 2
  std::size_t checked = 0;
  for (float p : points) {
    for (float x : {p, -p}) {
      ASSERT_EQ(float_to_e4m3(x), reference_encode(x))
          << "x=" << x << " bits=" << std::hex << std::bit_cast<std::uint32_t>(x);
      ++checked;
    }
  }
  EXPECT_GT(checked, 8000u);
}

TEST(Fp8E4M3, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(float_to_e4m3(inf), 0x7e);  // satfinite: Inf saturates to 448
  EXPECT_EQ(float_to_e4m3(-inf), 0xfe);
  EXPECT_EQ(float_to_e4m3(std::numeric_limits<float>::quiet_NaN()), 0x7f);
  EXPECT_EQ(float_to_e4m3(-std::numeric_limits<float>::quiet_NaN()), 0xff);
  EXPECT_EQ(float_to_e4m3(std::bit_cast<float>(0x7f800001u)), 0x7f);  // signalling NaN
  EXPECT_EQ(float_to_e4m3(-0.0f), 0x80);
  EXPECT_EQ(float_to_e4m3(0.0f), 0x00);
  EXPECT_EQ(float_to_e4m3(463.99997f), 0x7e);
  EXPECT_EQ(float_to_e4m3(-464.0f), 0xfe);
  EXPECT_EQ(float_to_e4m3(std::ldexp(1.0f, -10)), 0x00);
  EXPECT_EQ(float_to_e4m3(std::nextafter(std::ldexp(1.0f, -10), 1.0f)), 0x01);
  EXPECT_EQ(float_to_e4m3(std::ldexp(15.0f, -10)), 0x08);  // 7.5 * 2^-9 ties up to 2^-6
}

// Dense sweep: fp32 bit patterns over the whole E4M3 range and beyond (2^-12 .. 2^10) with an
// odd stride, against a neighbour-based reference built from the independent decoder.
TEST(Fp8E4M3, DenseSweepMatchesReference) {
  std::vector<double> values;  // positive finite values, ascending (codes 0..0x7E)
  for (unsigned c = 0; c < 0x7f; ++c) values.push_back(reference_e4m3(c));
  auto nearest = [&values](double x) -> unsigned {
    const auto it = std::upper_bound(values.begin(), values.end(), x);
    if (it == values.end()) return 0x7e;
    const auto hi = static_cast<unsigned>(it - values.begin());
    const unsigned lo = hi - 1;
    const double dl = x - values[lo], dh = values[hi] - x;
    if (dl < dh) return lo;
    if (dh < dl) return hi;
    return (lo & 1u) == 0 ? lo : hi;
  };
  std::size_t checked = 0;
  for (std::uint32_t u = 0x39800000u; u < 0x44800000u; u += 37) {
    const float x = std::bit_cast<float>(u);
    const unsigned want = nearest(x);
    ASSERT_EQ(float_to_e4m3(x), want) << std::hex << u;
    ASSERT_EQ(float_to_e4m3(-x), want | 0x80u) << std::hex << u;
    ++checked;
  }
  EXPECT_GT(checked, 1000000u);
}

TEST(Fp8E8M0, DecodesPowersOfTwoAndNaN) {
  for (unsigned e = 0; e < 255; ++e) {
    EXPECT_EQ(static_cast<double>(e8m0_to_float(static_cast<e8m0_bits>(e))),
              std::ldexp(1.0, static_cast<int>(e) - 127))
        << e;
  }
  EXPECT_TRUE(std::isnan(e8m0_to_float(0xff)));
  EXPECT_EQ(e8m0_from_exponent(0), 127);
  EXPECT_EQ(e8m0_from_exponent(-127), 0);
  EXPECT_EQ(e8m0_from_exponent(-300), 0);
  EXPECT_EQ(e8m0_from_exponent(127), 254);
  EXPECT_EQ(e8m0_from_exponent(128), 254);  // never produces the NaN byte
}

}  // namespace
}  // namespace shardwise
