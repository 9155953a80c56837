#include "shardwise/optim/newton_schulz.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "optim/reference_math.hpp"
#include "sanitizer_budget.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise::optim {
namespace {

using testing::Mat;

std::vector<std::array<double, 3>> schedule(NsCoefficients set, int steps) {
  std::vector<std::array<double, 3>> out;
  for (int i = 0; i < steps; ++i) out.push_back(ns_coefficients(set, i));
  return out;
}

Mat run_ns(const Mat& g, NewtonSchulzOptions options) {
  std::vector<float> in = testing::to_floats(g);
  std::vector<float> out(in.size());
  NewtonSchulz ns(options);
  ns.orthogonalize(in.data(), g.rows, g.cols, out.data());
  return testing::from_floats(out, g.rows, g.cols);
}

// The same input the fp32 code sees (rounded to float), so the comparison isolates arithmetic.
Mat as_float_input(const Mat& g) {
  return testing::from_floats(testing::to_floats(g), g.rows, g.cols);
}

// Scalar composite polynomial: what NS does to each normalised singular value.
double scalar_ns(double s, NsCoefficients set, int steps) {
  for (int i = 0; i < steps; ++i) {
    const auto [a, b, c] = ns_coefficients(set, i);
    s = a * s + b * s * s * s + c * s * s * s * s * s;
  }
  return s;
}

TEST(NewtonSchulzOracle, SingularValuesOfConstructedMatrix) {
  const std::vector<double> s = {0.001, 0.3, 1.0, 2.5, 7.0};
  const Mat m = testing::with_singular_values(5, 9, s, 11);
  const std::vector<double> got = testing::singular_values(m);
  for (std::size_t i = 0; i < s.size(); ++i) EXPECT_NEAR(got[i], s[i], 1e-10);
  const std::vector<double> got_t = testing::singular_values(testing::transpose(m));
  for (std::size_t i = 0; i < s.size(); ++i) EXPECT_NEAR(got_t[i], s[i], 1e-10);
}

TEST(NewtonSchulzCoefficients, KnownValues) {
  EXPECT_EQ(ns_coefficients(NsCoefficients::kQuintic, 0),
            (NsStepCoefficients{4.0848, -6.8946, 2.9270}));
  EXPECT_EQ(ns_coefficients(NsCoefficients::kQuintic, 4),
            (NsStepCoefficients{2.8366, -3.0525, 1.2012}));
  EXPECT_EQ(ns_coefficients(NsCoefficients::kQuintic, 5),
            ns_coefficients(NsCoefficients::kQuintic, 0));
  EXPECT_EQ(ns_coefficients(NsCoefficients::kSimple, 3),
            (NsStepCoefficients{3.4445, -4.7750, 2.0315}));
  const NsStepCoefficients pe0 = ns_coefficients(NsCoefficients::kPolarExpress, 0);
  EXPECT_DOUBLE_EQ(pe0[0], 8.28721201814563 / 1.01);
  EXPECT_DOUBLE_EQ(pe0[1], -23.595886519098837 / (1.01 * 1.01 * 1.01));
  EXPECT_DOUBLE_EQ(pe0[2], 17.300387312530933 / std::pow(1.01, 5));
  EXPECT_EQ(ns_coefficients(NsCoefficients::kPolarExpress, 7),
            (NsStepCoefficients{1.875, -1.25, 0.375}));
  EXPECT_EQ(ns_coefficients(NsCoefficients::kPolarExpress, 20),
            (NsStepCoefficients{1.875, -1.25, 0.375}));
  EXPECT_EQ(parse_ns_coefficients("polar_express", "x"), NsCoefficients::kPolarExpress);
  EXPECT_THROW(parse_ns_coefficients("cubic", "muon.coefficients"), InvalidArgument);
}

struct Shape {
  std::int64_t rows, cols;
};

// fp32 against the double oracle. Tolerance: each step is three GEMM-like products in fp32
// (unit roundoff 6e-8; dot products of k <= 520 terms of O(1/sqrt(k)) entries, typical error
// ~ sqrt(k) * 6e-8 * |entry|), and the step polynomials amplify perturbations of small singular
// values by |p'(0)| = a ~ 3-8 per step. Measured worst case is 4e-7 (printed below) on results
// whose entries are ~0.1; 5e-6 leaves ~10x headroom while still catching any wrong coefficient
// or transposition (those give errors of 1e-2 and more). Polar Express's first polynomial has
// slope |p'(1)| ~ 22 (it is built to blow small values up fast), measured worst 7e-6 on a
// rank-1 input: 5e-5 for that set.
TEST(NewtonSchulz, MatchesDoubleReferenceRandom) {
  for (auto set :
       {NsCoefficients::kQuintic, NsCoefficients::kSimple, NsCoefficients::kPolarExpress}) {
    for (Shape sh : {Shape{48, 96}, Shape{96, 48}, Shape{64, 64}, Shape{1, 33}, Shape{33, 1},
                     Shape{100, 128}, Shape{520, 200}}) {
      // The double oracle is slow at 520x200: one coefficient set, and none under the sanitizers.
      if (sh.rows == 520 && (set != NsCoefficients::kQuintic || test::kSanitizedBuild)) continue;
      for (bool syrk : {true, false}) {
        const Mat g = as_float_input(testing::random_gaussian(sh.rows, sh.cols, 7 + sh.rows));
        NewtonSchulzOptions o;
        o.coefficients = set;
        o.use_syrk = syrk;
        const Mat got = run_ns(g, o);
        const Mat want = testing::newton_schulz_reference(g, schedule(set, 5));
        const double err = testing::max_abs_diff(got, want);
        const double tolerance = set == NsCoefficients::kPolarExpress ? 5e-5 : 5e-6;
        EXPECT_LT(err, tolerance) << ns_coefficients_name(set) << " " << sh.rows << "x" << sh.cols;
        EXPECT_LT(testing::frobenius(want), 1.2 * std::sqrt(double(std::min(sh.rows, sh.cols))));
        if (set == NsCoefficients::kQuintic && syrk)
          std::printf("  random %3lldx%-3lld max|fp32-double| = %.2e\n", (long long)sh.rows,
                      (long long)sh.cols, err);
      }
    }
  }
}

// Ill-conditioned inputs (singular values from 1 down to 1e-6): the small singular directions
// are amplified by up to ~a^5 ~ 1e3 over 5 steps, rounding error included. Measured worst case
// 6e-6; asserted 5e-5.
TEST(NewtonSchulz, MatchesDoubleReferenceIllConditioned) {
  for (auto set : {NsCoefficients::kQuintic, NsCoefficients::kPolarExpress}) {
    for (Shape sh : {Shape{40, 80}, Shape{80, 40}, Shape{64, 64}}) {
      const std::int64_t r = std::min(sh.rows, sh.cols);
      std::vector<double> s(static_cast<std::size_t>(r));
      for (std::int64_t i = 0; i < r; ++i)
        s[static_cast<std::size_t>(i)] = std::pow(1e-6, double(i) / double(r - 1));
      const Mat g = as_float_input(testing::with_singular_values(sh.rows, sh.cols, s, 99));
      NewtonSchulzOptions o;
      o.coefficients = set;
      const double err = testing::max_abs_diff(
          run_ns(g, o), testing::newton_schulz_reference(g, schedule(set, 5)));
      EXPECT_LT(err, 5e-5) << ns_coefficients_name(set) << " " << sh.rows << "x" << sh.cols;
      std::printf("  ill-conditioned %s %lldx%lld max|fp32-double| = %.2e\n",
                  std::string(ns_coefficients_name(set)).c_str(), (long long)sh.rows,
                  (long long)sh.cols, err);
    }
  }
}

// Output singular values are p(s_i / |G|_F) for the composite step polynomial p. For inputs
// whose normalised singular values lie in [0.01, 1], the composite polynomials (5 steps) map
// into these measured bands (scanned on a 2e5-point log grid):
//   quintic [0.9778, 1.0318], simple [0.6818, 1.1344], polar_express [0.8703, 1.1236].
// (The often-quoted [0.68, 1.13] is the "simple" single-quintic band.)
TEST(NewtonSchulz, SingularValuesInsideCoefficientBand) {
  struct Band {
    NsCoefficients set;
    double lo, hi;
  };
  for (Band band : {Band{NsCoefficients::kQuintic, 0.9778, 1.0318},
                    Band{NsCoefficients::kSimple, 0.6818, 1.1344},
                    Band{NsCoefficients::kPolarExpress, 0.8703, 1.1236}}) {
    // The band really is what the scalar polynomial does on [0.01, 1].
    double lo = 10, hi = 0;
    for (int i = 0; i <= 20000; ++i) {
      const double y = scalar_ns(std::pow(0.01, 1.0 - i / 20000.0), band.set, 5);
      lo = std::min(lo, y);
      hi = std::max(hi, y);
    }
    EXPECT_NEAR(lo, band.lo, 1e-3);
    EXPECT_NEAR(hi, band.hi, 1e-3);

    for (Shape sh : {Shape{24, 72}, Shape{72, 24}, Shape{32, 32}}) {
      const std::int64_t r = std::min(sh.rows, sh.cols);
      // Spread the singular values so the normalised ones cover [~0.013, ~0.4].
      std::vector<double> s(static_cast<std::size_t>(r));
      for (std::int64_t i = 0; i < r; ++i)
        s[static_cast<std::size_t>(i)] = std::pow(0.03, double(i) / double(r - 1));
      double fro = 0;
      for (double e : s) fro += e * e;
      fro = std::sqrt(fro);
      ASSERT_GE(s.back() / fro, 0.01);
      const Mat g = as_float_input(testing::with_singular_values(sh.rows, sh.cols, s, 5));
      NewtonSchulzOptions o;
      o.coefficients = band.set;
      const std::vector<double> sv = testing::singular_values(run_ns(g, o));
      // Compare with the scalar prediction for each input singular value (sorted both ways).
      std::vector<double> predicted;
      for (double e : s) predicted.push_back(scalar_ns(e / fro, band.set, 5));
      std::sort(predicted.begin(), predicted.end());
      for (std::size_t i = 0; i < sv.size(); ++i) {
        EXPECT_GE(sv[i], band.lo - 1e-3) << ns_coefficients_name(band.set);
        EXPECT_LE(sv[i], band.hi + 1e-3) << ns_coefficients_name(band.set);
        EXPECT_NEAR(sv[i], predicted[i], 1e-4) << ns_coefficients_name(band.set) << " sv " << i;
      }
    }
  }
}

TEST(NewtonSchulz, TallIsTransposeOfWide) {
  const Mat g = as_float_input(testing::random_gaussian(90, 30, 3));
  NewtonSchulzOptions o;
  const Mat tall = run_ns(g, o);
  const Mat wide_t = testing::transpose(run_ns(testing::transpose(g), o));
  EXPECT_LT(testing::max_abs_diff(tall, wide_t), 2e-6);
  // And the tall result is orthogonalized along its short side: X^T X close to I.
  const Mat gram = testing::matmul(testing::transpose(tall), tall);
  for (std::int64_t i = 0; i < 30; ++i) EXPECT_NEAR(gram.at(i, i), 1.0, 0.08);
}

TEST(NewtonSchulz, RowBlocksEqualOrthogonalizingEachBlock) {
  // A fused QKV weight: 32 query rows, 16 key rows, 16 value rows, 24 columns.
  const std::vector<std::int64_t> split = {32, 16, 16};
  const Mat g = as_float_input(testing::random_gaussian(64, 24, 21));
  const std::vector<float> in = testing::to_floats(g);
  std::vector<float> split_out(in.size()), whole_out(in.size()), parts_out(in.size());
  NewtonSchulz ns{NewtonSchulzOptions{}};
  ns.orthogonalize_row_blocks(in.data(), 64, 24, split, split_out.data());
  ns.orthogonalize(in.data(), 64, 24, whole_out.data());
  std::int64_t first = 0;
  for (std::int64_t r : split) {
    NewtonSchulz fresh{NewtonSchulzOptions{}};
    fresh.orthogonalize(in.data() + first * 24, r, 24, parts_out.data() + first * 24);
    first += r;
  }
  EXPECT_EQ(split_out, parts_out);
  double diff = 0;
  for (std::size_t i = 0; i < in.size(); ++i)
    diff = std::max(diff, double(std::fabs(split_out[i] - whole_out[i])));
  EXPECT_GT(diff, 1e-2);  // splitting really changes the result
  // Each part also matches the double oracle of that part alone.
  first = 0;
  for (std::int64_t r : split) {
    Mat part(r, 24);
    for (std::int64_t i = 0; i < r * 24; ++i)
      part.v[std::size_t(i)] = g.v[std::size_t(first * 24 + i)];
    const Mat want = testing::newton_schulz_reference(part, schedule(NsCoefficients::kQuintic, 5));
    for (std::int64_t i = 0; i < r * 24; ++i)
      EXPECT_NEAR(split_out[std::size_t(first * 24 + i)], want.v[std::size_t(i)], 2e-4);
    first += r;
  }
  EXPECT_THROW(ns.orthogonalize_row_blocks(in.data(), 64, 24, std::vector<std::int64_t>{32, 16},
                                           split_out.data()),
               ShapeError);
}

TEST(NewtonSchulz, InPlaceAndZeroInput) {
  const Mat g = as_float_input(testing::random_gaussian(20, 30, 8));
  std::vector<float> buf = testing::to_floats(g);
  NewtonSchulz ns{NewtonSchulzOptions{}};
  ns.orthogonalize(buf.data(), 20, 30, buf.data());
  EXPECT_LT(testing::max_abs_diff(testing::from_floats(buf, 20, 30), run_ns(g, {})), 1e-7);
  std::vector<float> zeros(600, 0.0f), out(600, 1.0f);
  ns.orthogonalize(zeros.data(), 20, 30, out.data());
  for (float v : out) EXPECT_EQ(v, 0.0f);
}

// bf16 GEMM inputs: compared with the double oracle that rounds at the same points. Elements
// near a bf16 rounding boundary may round differently (1 bf16 ulp = 2^-8 relative), so the
// tolerance is bf16-sized; and the result must differ from fp32 (rounding really happens).
TEST(NewtonSchulz, Bf16InputsMatchBf16Reference) {
  for (Shape sh : {Shape{48, 96}, Shape{96, 48}}) {
    const Mat g = as_float_input(testing::random_gaussian(sh.rows, sh.cols, 17));
    NewtonSchulzOptions o;
    o.precision = MatmulPrecision::kBf16;
    const Mat got = run_ns(g, o);
    const Mat want_bf16 =
        testing::newton_schulz_reference(g, schedule(NsCoefficients::kQuintic, 5), 1e-7, true);
    const Mat want_fp32 =
        testing::newton_schulz_reference(g, schedule(NsCoefficients::kQuintic, 5));
    const double err_bf16 = testing::max_abs_diff(got, want_bf16);
    const double err_fp32 = testing::max_abs_diff(got, want_fp32);
    std::printf("  bf16 %lldx%lld: max|got-bf16 ref| = %.2e, max|got-fp32 ref| = %.2e\n",
                (long long)sh.rows, (long long)sh.cols, err_bf16, err_fp32);
    // Measured: 7.8e-4 / 1.0e-4 against the bf16 oracle, 3.5e-3 / 4.3e-3 against fp32.
    EXPECT_LT(err_bf16, 2.5e-3);
    EXPECT_LT(err_bf16, 0.5 * err_fp32);
    // Still an orthogonalization: singular values in the (bf16-widened) quintic band.
    for (double s : testing::singular_values(got)) {
      EXPECT_GT(s, 0.6);
      EXPECT_LT(s, 1.2);
    }
  }
}

TEST(NewtonSchulz, FlopCount) {
  EXPECT_DOUBLE_EQ(newton_schulz_gemm_flops(1024, 4096, 5),
                   5 * (4.0 * 1024 * 1024 * 4096 + 2.0 * 1024 * 1024 * 1024));
  EXPECT_DOUBLE_EQ(newton_schulz_gemm_flops(4096, 1024, 1),
                   newton_schulz_gemm_flops(1024, 4096, 1));
}

}  // namespace
}  // namespace shardwise::optim
