// Device grad norm / zero count / clipping against optim/grad_stats.hpp and
// optim::clip_coefficient on lists of spans (empty spans, one element, odd sizes, more elements
// than one pass of the grid). Tolerances: the zero count and the scaled values are exact (a
// count; one fp32 multiply by the same coefficient). The fp64 sum of squares differs from the
// CPU's only in summation order: every term x^2 of an fp32 x is exact in fp64, and n positive
// terms summed in any order are within (n - 1) 2^-53 of the exact sum relatively, so two orders
// differ by at most 2 (n - 1) 2^-53 relatively; the test allows exactly that. Skips without GPU.
#include "shardwise/cuda/grad_stats_cuda.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "cuda_test_support.hpp"
#include "shardwise/optim/grad_stats.hpp"
#include "shardwise/optim/optimizer.hpp"

namespace shardwise::cuda {
namespace {

// Host tensors and their device copies, as spans.
struct Grads {
  std::vector<std::vector<float>> host;
  std::vector<DeviceBuffer> device;
  std::vector<DeviceSpan> spans;

  explicit Grads(const std::vector<std::size_t>& sizes, float scale, std::uint32_t seed) {
    for (std::size_t n : sizes) {
      std::vector<float> v = test::normal_values(n, scale, seed++);
      for (std::size_t i = 0; i < n; i += 13) v[i] = (i % 2 == 0) ? 0.0f : -0.0f;
      host.push_back(v);
      device.push_back(to_device(v));
      spans.push_back({device.back().as<float>(), static_cast<std::int64_t>(n)});
    }
  }
  double cpu_sum_of_squares() const {
    double total = 0.0;
    for (const auto& v : host) total += optim::sum_of_squares(v);
    return total;
  }
  std::int64_t elements() const {
    std::int64_t n = 0;
    for (const auto& v : host) n += static_cast<std::int64_t>(v.size());
    return n;
  }
};

const std::vector<std::size_t> kSizes = {0, 1, 1000, 0, 4099, (std::size_t{1} << 21) + 3, 7};

TEST(GradStatsCuda, SumOfSquaresMatchesCpu) {
  SW_SKIP_WITHOUT_GPU();
  Grads g(kSizes, 0.3f, 1);
  GradStatsCuda stats;
  const double cpu = g.cpu_sum_of_squares();
  const double allowed = 2.0 * static_cast<double>(g.elements()) * std::ldexp(1.0, -53) * cpu;
  EXPECT_NEAR(stats.sum_of_squares(g.spans), cpu, allowed);
  // Deterministic: the same spans give the same bits.
  EXPECT_EQ(stats.sum_of_squares(g.spans), stats.sum_of_squares(g.spans));
  EXPECT_EQ(stats.sum_of_squares({}), 0.0);
}

TEST(GradStatsCuda, CountZerosMatchesCpu) {
  SW_SKIP_WITHOUT_GPU();
  Grads g(kSizes, 1.0f, 2);
  std::int64_t cpu = 0;
  for (const auto& v : g.host) cpu += optim::count_zeros(v);
  GradStatsCuda stats;
  EXPECT_EQ(stats.count_zeros(g.spans), cpu);
  EXPECT_EQ(stats.count_zeros({}), 0);
}

void expect_scaled_by(const Grads& g, float coeff) {
  for (std::size_t t = 0; t < g.host.size(); ++t) {
    std::vector<float> expected = g.host[t];
    optim::scale_in_place(expected, coeff);
    EXPECT_EQ(test::first_bit_difference(to_host<float>(g.device[t], expected.size()), expected),
              "")
        << "span " << t;
  }
}

TEST(GradStatsCuda, ClipScalesByMegatronsCoefficient) {
  SW_SKIP_WITHOUT_GPU();
  Grads g(kSizes, 1.0f, 3);
  const double norm = std::sqrt(g.cpu_sum_of_squares());
  GradStatsCuda stats;
  const ClipResult r = stats.clip(g.spans, norm / 4);
  synchronize();
  // The sums differ by at most 2 (n - 1) 2^-53 relatively, so their square roots by half that.
  EXPECT_NEAR(r.grad_norm, norm, static_cast<double>(g.elements()) * std::ldexp(1.0, -53) * norm);
  EXPECT_EQ(r.clip_coeff, optim::clip_coefficient(r.grad_norm, norm / 4));
  EXPECT_LT(r.clip_coeff, 0.26);
  expect_scaled_by(g, static_cast<float>(r.clip_coeff));
}

TEST(GradStatsCuda, ClipLeavesSmallGradsAlone) {
  SW_SKIP_WITHOUT_GPU();
  Grads g(kSizes, 1e-3f, 4);
  GradStatsCuda stats;
  const ClipResult big_max = stats.clip(g.spans, 1e6);
  const ClipResult disabled = stats.clip(g.spans, 0.0);
  synchronize();
  EXPECT_EQ(big_max.clip_coeff, 1.0);
  EXPECT_EQ(disabled.clip_coeff, 1.0);
  expect_scaled_by(g, 1.0f);
}

TEST(GradStatsCuda, ClipSkipsANonFiniteNorm) {
  SW_SKIP_WITHOUT_GPU();
  Grads g({100, 50}, 1.0f, 5);
  g.host[1][7] = INFINITY;
  copy_to_device(g.device[1].data(), g.host[1].data(), g.host[1].size() * sizeof(float));
  GradStatsCuda stats;
  const ClipResult r = stats.clip(g.spans, 1e-3);
  synchronize();
  EXPECT_TRUE(std::isinf(r.grad_norm));
  EXPECT_EQ(r.clip_coeff, 1.0);
  expect_scaled_by(g, 1.0f);
}

}  // namespace
}  // namespace shardwise::cuda
