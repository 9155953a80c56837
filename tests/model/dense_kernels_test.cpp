// GELU forward keeping its derivative, and GELU backward summing the bias gradient in the same
// pass: against the formula and against the separate steps (bit for bit).
#include "shardwise/model/dense_kernels.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace shardwise {
namespace {

template <typename Scalar>
std::vector<Scalar> random_values(std::size_t count, double stddev, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> normal(0.0, stddev);
  std::vector<Scalar> v(count);
  for (Scalar& e : v) e = static_cast<Scalar>(normal(gen));
  return v;
}

TEST(GeluKernels, ForwardKeepsTheDerivative) {
  const auto x = random_values<double>(500, 3.0, 1);
  std::vector<double> y, dydx;
  gelu_forward(x, y, dydx);
  ASSERT_EQ(y.size(), x.size());
  ASSERT_EQ(dydx.size(), x.size());
  const double k = std::sqrt(2.0 / M_PI), c = 0.044715;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double v = x[i];
    const double t = std::tanh(k * (v + c * v * v * v));
    EXPECT_NEAR(y[i], 0.5 * v * (1 + t), 1e-14) << "x=" << v;
    // Against a central difference of gelu itself.
    const double step = 1e-6;
    const auto gelu = [&](double u) { return 0.5 * u * (1 + std::tanh(k * (u + c * u * u * u))); };
    EXPECT_NEAR(dydx[i], (gelu(v + step) - gelu(v - step)) / (2 * step), 1e-8) << "x=" << v;
  }
}

template <typename Scalar>
void check_fused_bias_sums(std::int64_t rows, std::int64_t cols) {
  SCOPED_TRACE(testing::Message() << rows << " x " << cols << ", " << sizeof(Scalar) << " bytes");
  const auto count = static_cast<std::size_t>(rows * cols);
  const auto x = random_values<Scalar>(count, 2.0, 2);
  const auto upstream = random_values<Scalar>(count, 1.0, 3);
  const auto bias_start = random_values<Scalar>(static_cast<std::size_t>(cols), 1.0, 4);
  std::vector<Scalar> y, dydx;
  gelu_forward(x, y, dydx);

  // The separate steps: multiply, then the column sums.
  std::vector<Scalar> want = upstream;
  gelu_backward(dydx, want, cols, static_cast<Scalar*>(nullptr));
  std::vector<Scalar> want_bias = bias_start;
  add_column_sums(want.data(), rows, cols, want_bias.data());
  for (std::size_t i = 0; i < count; ++i) ASSERT_EQ(want[i], upstream[i] * dydx[i]) << i;

  std::vector<Scalar> got = upstream, got_bias = bias_start;
  gelu_backward(dydx, got, cols, got_bias.data());
  for (std::size_t i = 0; i < count; ++i) ASSERT_EQ(got[i], want[i]) << i;
  for (std::int64_t c = 0; c < cols; ++c) ASSERT_EQ(got_bias[c], want_bias[c]) << "column " << c;
}

TEST(GeluKernels, BackwardSumsTheBiasGradientInTheSamePass) {
  for (std::int64_t cols : {1, 7, 64}) {
    check_fused_bias_sums<float>(13, cols);
    check_fused_bias_sums<double>(13, cols);
  }
}

TEST(GeluKernels, ColumnSumsAddRowsInOrder) {
  // In row order each 4e-8 is below half an ulp of 1 and is lost; summed first (another order)
  // the two would round 1 up.
  const std::vector<float> m = {1.0f, 4e-8f, 4e-8f};
  std::vector<float> sums = {0.0f};
  add_column_sums(m.data(), 3, 1, sums.data());
  EXPECT_EQ(sums[0], 1.0f);
  EXPECT_NE(1.0f + (4e-8f + 4e-8f), 1.0f);
}

}  // namespace
}  // namespace shardwise
