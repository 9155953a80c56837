// BLAS wrappers, gradient statistics, main <-> model precision copies and the AdamW element
// loop on every ISA level.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "optim/reference_math.hpp"
#include "shardwise/core/blas.hpp"
#include "shardwise/core/cpu_isa.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/optim/adamw.hpp"
#include "shardwise/optim/grad_stats.hpp"
#include "shardwise/optim/mixed_precision.hpp"

namespace shardwise::optim {
namespace {

using testing::Mat;

// Row-major m x n matrix stored with leading dimension ld >= n (padding filled with junk).
std::vector<float> padded(const Mat& a, std::int64_t ld) {
  std::vector<float> out(static_cast<std::size_t>(a.rows * ld), 123.0f);
  for (std::int64_t i = 0; i < a.rows; ++i)
    for (std::int64_t j = 0; j < a.cols; ++j) out[std::size_t(i * ld + j)] = float(a.at(i, j));
  return out;
}

TEST(Blas, SgemmAllTransposeCombinationsWithLeadingDimensions) {
  const std::int64_t m = 7, n = 5, k = 9;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      const Mat a = testing::as_float_matrix(testing::random_gaussian(ta ? k : m, ta ? m : k, 1));
      const Mat b = testing::as_float_matrix(testing::random_gaussian(tb ? n : k, tb ? k : n, 2));
      const Mat c0 = testing::as_float_matrix(testing::random_gaussian(m, n, 3));
      const Mat want_ab =
          testing::matmul(ta ? testing::transpose(a) : a, tb ? testing::transpose(b) : b);
      std::vector<float> pa = padded(a, a.cols + 3), pb = padded(b, b.cols + 2),
                         pc = padded(c0, n + 1);
      blas::sgemm(ta ? blas::Op::kTranspose : blas::Op::kNone,
                  tb ? blas::Op::kTranspose : blas::Op::kNone, m, n, k, 2.0f, pa.data(), a.cols + 3,
                  pb.data(), b.cols + 2, -0.5f, pc.data(), n + 1);
      for (std::int64_t i = 0; i < m; ++i) {
        for (std::int64_t j = 0; j < n; ++j)
          EXPECT_NEAR(pc[std::size_t(i * (n + 1) + j)], 2.0 * want_ab.at(i, j) - 0.5 * c0.at(i, j),
                      1e-5);
        EXPECT_EQ(pc[std::size_t(i * (n + 1) + n)], 123.0f);  // padding untouched
      }
    }
  }
}

TEST(Blas, SsyrkBothSidesAndMirror) {
  const Mat a = testing::as_float_matrix(testing::random_gaussian(6, 11, 4));
  for (bool trans : {false, true}) {
    const Mat src = trans ? testing::transpose(a) : a;  // kTranspose reads an 11 x 6 matrix
    const Mat want = testing::matmul(a, testing::transpose(a));
    std::vector<float> ps = padded(src, src.cols), c(36, -7.0f);
    blas::ssyrk(trans ? blas::Op::kTranspose : blas::Op::kNone, 6, 11, 1.0f, ps.data(), src.cols,
                0.0f, c.data(), 6);
    for (std::int64_t i = 0; i < 6; ++i) {
      for (std::int64_t j = 0; j < 6; ++j) {
        if (j >= i)
          EXPECT_NEAR(c[std::size_t(i * 6 + j)], want.at(i, j), 1e-5);
        else
          EXPECT_EQ(c[std::size_t(i * 6 + j)], -7.0f);  // lower triangle not written
      }
    }
    blas::fill_lower_from_upper(6, c.data(), 6);
    for (std::int64_t i = 0; i < 6; ++i)
      for (std::int64_t j = 0; j < 6; ++j)
        EXPECT_NEAR(c[std::size_t(i * 6 + j)], want.at(i, j), 1e-5);
  }
  // Larger than one 64-wide tile, with a leading dimension.
  std::vector<float> big(150 * 151);
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = float(i);
  blas::fill_lower_from_upper(150, big.data(), 151);
  for (std::int64_t i = 0; i < 150; ++i)
    for (std::int64_t j = 0; j < 150; ++j)
      ASSERT_EQ(big[std::size_t(i * 151 + j)], float(std::min(i, j) * 151 + std::max(i, j)));
}

TEST(Blas, ThreadCountRoundTrip) {
  const int before = blas::num_threads();
  blas::set_num_threads(1);
  EXPECT_EQ(blas::num_threads(), 1);
  blas::set_num_threads(before);
  EXPECT_THROW(blas::set_num_threads(0), InvalidArgument);
  EXPECT_FALSE(blas::library_config().empty());
}

TEST(GradStats, SumOfSquaresZerosAndScale) {
  for (std::size_t n : {0u, 1u, 7u, 8u, 9u, 1001u}) {
    std::vector<float> v = testing::to_floats(testing::random_gaussian(1, std::int64_t(n), n + 1));
    double want = 0;
    for (float x : v) want += double(x) * x;
    EXPECT_NEAR(sum_of_squares(v), want, 1e-12 * (want + 1)) << n;
  }
  // Large values whose squares overflow float still sum correctly in double.
  const std::vector<float> huge = {3e20f, -4e20f};
  EXPECT_NEAR(std::sqrt(sum_of_squares(huge)), 5e20, 5e20 * 1e-7);
  std::vector<float> z = {0.0f, -0.0f, 1.0f, 1e-45f, 0.0f};
  EXPECT_EQ(count_zeros(z), 3);
  scale_in_place(z, 2.0f);
  EXPECT_EQ(z[2], 2.0f);
  EXPECT_EQ(z[3], 2.0f * 1e-45f);  // subnormals scale exactly
}

TEST(MixedPrecision, MainToModelRoundsToNearestEven) {
  const std::vector<float> main = {
      1.0f,
      std::bit_cast<float>(0x3F808000u),  // 1 + 2^-8: halfway, ties to even -> 1.0 (0x3F80)
      std::bit_cast<float>(0x3F818000u),  // halfway between 0x3F81 and 0x3F82 -> 0x3F82
      std::bit_cast<float>(0x3F808001u),  // just above halfway -> 0x3F81
      -2.5f,
      std::bit_cast<float>(0x7F7FFFFFu),  // FLT_MAX rounds up to +inf in bf16
  };
  std::vector<bf16_bits> model(main.size());
  copy_main_to_model(main, model);
  const std::vector<bf16_bits> want = {0x3F80, 0x3F80, 0x3F82, 0x3F81, 0xC020, 0x7F80};
  EXPECT_EQ(model, want);
  std::vector<float> back(main.size());
  copy_model_to_main(model, back);
  EXPECT_EQ(back[1], 1.0f);
  EXPECT_EQ(back[3], std::bit_cast<float>(0x3F810000u));
  EXPECT_TRUE(std::isinf(back[5]));
  std::vector<bf16_bits> too_small(3);
  EXPECT_THROW(copy_main_to_model(main, too_small), ShapeError);
}

TEST(MixedPrecision, TensorViewDispatch) {
  const std::vector<float> main = {1.0f, 65520.0f, -0.333333343f};
  std::vector<fp16_bits> half(3);
  copy_main_to_model(main, TensorView{half.data(), 3, DType::kFloat16});
  EXPECT_EQ(half[0], 0x3C00);
  EXPECT_EQ(half[1], 0x7C00);  // overflows to inf
  EXPECT_EQ(half[2], 0xB555);  // -0.33325195 (nearest fp16 to -1/3)
  std::vector<float> back(3);
  copy_model_to_main(TensorView{half.data(), 3, DType::kFloat16}, back);
  EXPECT_FLOAT_EQ(back[2], -0.33325195f);
  std::vector<bf16_bits> bf(3);
  copy_main_to_model(main, TensorView{bf.data(), 3, DType::kBFloat16});
  EXPECT_EQ(bf[0], 0x3F80);
  std::vector<float> f32(3);
  copy_main_to_model(main, TensorView{f32.data(), 3, DType::kFloat32});
  EXPECT_EQ(f32, main);
  std::vector<std::uint8_t> bytes(3);
  EXPECT_THROW(copy_main_to_model(main, TensorView{bytes.data(), 3, DType::kFloat8E4M3}),
               InvalidArgument);
}

// The torch.optim.AdamW element update written out in the test, one element at a time.
void reference_adamw(const AdamWStepScalars& s, float& p, float g, float& m, float& v) {
  m = s.beta1 * m + s.one_minus_beta1 * g;
  v = s.beta2 * v + s.one_minus_beta2 * (g * g);
  const float denom = std::sqrt(v) * s.inv_sqrt_bias2 + s.eps;
  p = p * s.decay - s.step_size * (m / denom);
}

TEST(AdamWKernel, EveryIsaLevelGivesTheScalarBits) {
  const AdamWStepScalars s = AdamWStepScalars::make(3e-3, 0.1, 0.9, 0.95, 1e-8, 7);
  std::mt19937 gen(9);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  // 16-wide vectors, 8-wide, 4-wide and the scalar tail all get elements.
  const std::size_t n = 16 * 5 + 8 + 4 + 3;
  std::vector<float> p0(n), g(n), m0(n), v0(n);
  for (std::size_t i = 0; i < n; ++i) {
    p0[i] = normal(gen), g[i] = normal(gen) * 1e-2f, m0[i] = normal(gen) * 1e-3f;
    v0[i] = std::fabs(normal(gen)) * 1e-5f;
  }
  g[3] = 0.0f, v0[3] = 0.0f;  // denominator eps only
  std::vector<float> want_p = p0, want_m = m0, want_v = v0;
  for (std::size_t i = 0; i < n; ++i) reference_adamw(s, want_p[i], g[i], want_m[i], want_v[i]);
  for (IsaLevel level : supported_isa_levels()) {
    ScopedIsaLevel forced(level);
    std::vector<float> p = p0, m = m0, v = v0;
    adamw_update(s, p, g, m, v);
    for (std::size_t i = 0; i < n; ++i) {
      ASSERT_EQ(std::bit_cast<std::uint32_t>(p[i]), std::bit_cast<std::uint32_t>(want_p[i]))
          << isa_level_name(level) << " element " << i;
      ASSERT_EQ(std::bit_cast<std::uint32_t>(m[i]), std::bit_cast<std::uint32_t>(want_m[i]));
      ASSERT_EQ(std::bit_cast<std::uint32_t>(v[i]), std::bit_cast<std::uint32_t>(want_v[i]));
    }
  }
}

}  // namespace
}  // namespace shardwise::optim
