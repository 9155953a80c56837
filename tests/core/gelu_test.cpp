// The vectorised tanh / GELU against libm (accuracy) and against its own scalar form on every
// ISA level the CPU offers (bit for bit).
#include "shardwise/core/gelu.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "shardwise/core/cpu_isa.hpp"

namespace shardwise {
namespace {

// Distance in units in the last place between two finite floats of the same sign or zero.
std::int64_t ulp_distance(float a, float b) {
  auto ordered = [](float f) {
    const auto i = static_cast<std::int64_t>(std::bit_cast<std::int32_t>(f));
    return i < 0 ? std::int64_t{INT32_MIN} - i : i;
  };
  const std::int64_t d = ordered(a) - ordered(b);
  return d < 0 ? -d : d;
}

// Every `step`-th fp32 from 1e-30 to 12 (and the negatives): both polynomial ranges, the switch
// at 0.625, and the saturation to 1.
std::vector<float> sweep(std::uint32_t step) {
  std::vector<float> out;
  for (std::uint32_t b = std::bit_cast<std::uint32_t>(1e-30f);
       b <= std::bit_cast<std::uint32_t>(12.0f); b += step) {
    out.push_back(std::bit_cast<float>(b));
    out.push_back(-std::bit_cast<float>(b));
  }
  for (float x : {0.0f, -0.0f, 0.625f, 0.62499994f, 9.0f, 9.01f, 100.0f, -100.0f}) out.push_back(x);
  return out;
}

TEST(Gelu, TanhWithinTwoUlpOfLibm) {
  std::int64_t worst = 0;
  float worst_x = 0;
  for (float x : sweep(509)) {
    const std::int64_t d = ulp_distance(tanh_approx(x), std::tanh(x));
    if (d > worst) worst = d, worst_x = x;
  }
  EXPECT_LE(worst, 2) << "at x=" << worst_x;
  RecordProperty("worst_ulp", static_cast<int>(worst));
}

TEST(Gelu, TanhSpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(tanh_approx(inf), 1.0f);
  EXPECT_EQ(tanh_approx(-inf), -1.0f);
  EXPECT_TRUE(std::isnan(tanh_approx(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(std::signbit(tanh_approx(-0.0f)));
  EXPECT_EQ(tanh_approx(1e-30f), 1e-30f);
}

TEST(Gelu, EveryIsaLevelGivesTheScalarBits) {
  const std::vector<float> x = sweep(4099);
  const auto n = static_cast<std::int64_t>(x.size());
  std::vector<float> want_fwd(x.size()), want_bwd(x.size(), 1.0f);
  for (std::size_t i = 0; i < x.size(); ++i) want_fwd[i] = gelu_approx(x[i]);
  for (std::size_t i = 0; i < x.size(); ++i) want_bwd[i] = gelu_grad_approx(x[i]);
  for (IsaLevel level : supported_isa_levels()) {
    ScopedIsaLevel forced(level);
    std::vector<float> t(x.size()), fwd(x.size()), bwd(x.size(), 1.0f);
    std::vector<float> fused_fwd(x.size()), fused_grad(x.size());
    tanh_approx_n(x.data(), t.data(), n);
    gelu_tanh_forward(x.data(), fwd.data(), n);
    gelu_tanh_backward(x.data(), bwd.data(), n);
    gelu_tanh_forward_and_grad(x.data(), fused_fwd.data(), fused_grad.data(), n);
    for (std::size_t i = 0; i < x.size(); ++i) {
      ASSERT_EQ(std::bit_cast<std::uint32_t>(t[i]), std::bit_cast<std::uint32_t>(tanh_approx(x[i])))
          << isa_level_name(level) << " x=" << x[i];
      ASSERT_EQ(std::bit_cast<std::uint32_t>(fwd[i]), std::bit_cast<std::uint32_t>(want_fwd[i]))
          << isa_level_name(level) << " x=" << x[i];
      ASSERT_EQ(std::bit_cast<std::uint32_t>(bwd[i]), std::bit_cast<std::uint32_t>(want_bwd[i]))
          << isa_level_name(level) << " x=" << x[i];
      // The fused forward: the same output, and the factor backward multiplies by (times 1).
      ASSERT_EQ(std::bit_cast<std::uint32_t>(fused_fwd[i]),
                std::bit_cast<std::uint32_t>(want_fwd[i]))
          << isa_level_name(level) << " x=" << x[i];
      ASSERT_EQ(std::bit_cast<std::uint32_t>(fused_grad[i]),
                std::bit_cast<std::uint32_t>(want_bwd[i]))
          << isa_level_name(level) << " x=" << x[i];
    }
  }
}

// The backward with the bias gradient: products and column sums (added row by row) are the same
// bits on every ISA level as a plain loop; odd widths cover the vector tails.
TEST(Gelu, ApplyGradWithBiasSumsGivesTheSameBitsOnEveryIsaLevel) {
  constexpr std::int64_t kRows = 37, kCols = 45;
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> g(kRows * kCols), d0(kRows * kCols), sums0(kCols);
  for (float& v : g) v = normal(rng);
  for (float& v : d0) v = normal(rng);
  for (float& v : sums0) v = normal(rng);
  std::vector<float> want_d = d0, want_sums = sums0;
  for (std::int64_t i = 0; i < kRows; ++i) {
    for (std::int64_t c = 0; c < kCols; ++c) {
      want_d[i * kCols + c] *= g[i * kCols + c];
      want_sums[c] += want_d[i * kCols + c];
    }
  }
  for (IsaLevel level : supported_isa_levels()) {
    ScopedIsaLevel forced(level);
    std::vector<float> d = d0, sums = sums0;
    gelu_apply_grad_with_bias_sums(g.data(), d.data(), kRows, kCols, sums.data());
    for (std::size_t i = 0; i < d.size(); ++i) {
      ASSERT_EQ(std::bit_cast<std::uint32_t>(d[i]), std::bit_cast<std::uint32_t>(want_d[i]))
          << isa_level_name(level) << " element " << i;
    }
    for (std::size_t c = 0; c < sums.size(); ++c) {
      ASSERT_EQ(std::bit_cast<std::uint32_t>(sums[c]), std::bit_cast<std::uint32_t>(want_sums[c]))
          << isa_level_name(level) << " column " << c;
    }
  }
}

TEST(Gelu, ForwardAndBackwardMatchDoublePrecisionFormula) {
  std::mt19937 gen(3);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> x(1000);
  for (float& v : x) v = normal(gen);
  const auto n = static_cast<std::int64_t>(x.size());
  std::vector<float> y(x.size()), d(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) d[i] = 0.5f + static_cast<float>(i % 3);
  const std::vector<float> d0 = d;
  gelu_tanh_forward(x.data(), y.data(), n);
  gelu_tanh_backward(x.data(), d.data(), n);
  const double k = std::sqrt(2.0 / M_PI), c = 0.044715;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double v = x[i];
    const double t = std::tanh(k * (v + c * v * v * v));
    const double want_y = 0.5 * v * (1 + t);
    const double want_grad = 0.5 * (1 + t) + 0.5 * v * (1 - t * t) * k * (1 + 3 * c * v * v);
    EXPECT_NEAR(y[i], want_y, 1e-6 * (1 + std::fabs(want_y))) << "x=" << v;
    EXPECT_NEAR(d[i], d0[i] * want_grad, 1e-6 * d0[i] * (1 + std::fabs(want_grad))) << "x=" << v;
  }
  // In place gives the same values.
  std::vector<float> z = x;
  gelu_tanh_forward(z.data(), z.data(), n);
  EXPECT_EQ(z, y);
}

// Where tanh(u) is near -1 the output is a tiny fraction of x: 0.5 x (1 + tanh(u)) would lose it
// to cancellation (up to 0.3 relative error over [-5, 5] in that form), x / (1 + exp(-2u)) keeps
// it.
TEST(Gelu, ForwardKeepsRelativeAccuracyInTheNegativeTail) {
  const double k = std::sqrt(2.0 / M_PI), c = 0.044715;
  double worst = 0, worst_x = 0;
  for (float x = -9.0f; x < -0.5f; x += 0.001f) {
    const double v = x, u = k * (v + c * v * v * v);
    const double want = v / (1 + std::exp(-2 * u));
    const double rel = std::fabs(gelu_approx(x) - want) / std::fabs(want);
    if (rel > worst) worst = rel, worst_x = x;
  }
  // What is left is u's own fp32 rounding, magnified by exp: ~1e-5 near x = -9 (2u = -62).
  EXPECT_LT(worst, 2e-5) << "at x=" << worst_x;
}

}  // namespace
}  // namespace shardwise
