#include "shardwise/core/float_convert.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace shardwise {
namespace {

// Independent reference: pick the nearer of the two neighbouring representable values of a
// format given by its decode function, ties to the one with an even code.
template <typename Decode>
std::uint16_t nearest_even(double x, std::uint16_t lo, std::uint16_t hi, Decode decode) {
  const double dlo = std::fabs(x - decode(lo));
  const double dhi = std::fabs(x - decode(hi));
  if (dlo < dhi) return lo;
  if (dhi < dlo) return hi;
  return (lo & 1u) == 0 ? lo : hi;
}

TEST(FloatConvert, Bf16DecodeEncodeEveryFiniteCode) {
  for (std::uint32_t c = 0; c < 0x10000; ++c) {
    const auto code = static_cast<std::uint16_t>(c);
    const float f = bf16_to_float(code);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(f))));
      continue;
    }
    EXPECT_EQ(float_to_bf16(f), code) << std::hex << c;
  }
}

TEST(FloatConvert, Bf16RoundsToNearestEvenBetweenNeighbours) {
  // Positive finite codes below the max: every fp32 in between must round to the nearer one.
  for (std::uint32_t c = 0; c < 0x7f7f; c += 7) {
    const auto lo = static_cast<std::uint16_t>(c);
    const auto hi = static_cast<std::uint16_t>(c + 1);
    const double a = bf16_to_float(lo), b = bf16_to_float(hi);
    for (double t : {0.25, 0.5, 0.5000001, 0.4999999, 0.75}) {
      const float x = static_cast<float>(a + (b - a) * t);
      const std::uint16_t want = nearest_even(
          x, lo, hi, [](std::uint16_t v) { return static_cast<double>(bf16_to_float(v)); });
      ASSERT_EQ(float_to_bf16(x), want) << "code " << c << " t " << t;
      ASSERT_EQ(float_to_bf16(-x), want | 0x8000u);
    }
  }
}

TEST(FloatConvert, Fp16DecodeEncodeEveryCode) {
  for (std::uint32_t c = 0; c < 0x10000; ++c) {
    const auto code = static_cast<std::uint16_t>(c);
    const float f = fp16_to_float(code);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(fp16_to_float(float_to_fp16(f))));
      continue;
    }
    EXPECT_EQ(float_to_fp16(f), code) << std::hex << c;
  }
  EXPECT_EQ(fp16_to_float(0x3c00), 1.0f);
  EXPECT_EQ(fp16_to_float(0x7bff), 65504.0f);
  EXPECT_EQ(fp16_to_float(0x0001), std::ldexp(1.0f, -24));
}

TEST(FloatConvert, Fp16RoundsToNearestEvenBetweenNeighbours) {
  for (std::uint32_t c = 0; c < 0x7bff; c += 3) {
    const auto lo = static_cast<std::uint16_t>(c);
    const auto hi = static_cast<std::uint16_t>(c + 1);
    const double a = fp16_to_float(lo), b = fp16_to_float(hi);
    for (double t : {0.25, 0.5, 0.5000001, 0.4999999, 0.75}) {
      const float x = static_cast<float>(a + (b - a) * t);
      const std::uint16_t want = nearest_even(
          x, lo, hi, [](std::uint16_t v) { return static_cast<double>(fp16_to_float(v)); });
      ASSERT_EQ(float_to_fp16(x), want) << "code " << c << " t " << t;
    }
  }
  EXPECT_EQ(float_to_fp16(65520.0f), 0x7c00);  // rounds up to infinity
  EXPECT_EQ(float_to_fp16(65519.0f), 0x7bff);
  EXPECT_EQ(float_to_fp16(std::numeric_limits<float>::infinity()), 0x7c00);
}

}  // namespace
}  // namespace shardwise
