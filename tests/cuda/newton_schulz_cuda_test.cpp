// cuBLAS Newton-Schulz against optim::NewtonSchulz (the CPU reference) on random matrices:
// square, wide, tall, odd sizes and vectors, every coefficient set, fp32 with TF32 off and on,
// bf16 GEMMs, and every route for the symmetric products (GEMM, SYRK, GEMMs on blocks).
//
// Tolerances (relative Frobenius distance to the CPU result). Model: each GEMM perturbs its
// result by a relative error proportional to a unit roundoff u, and five NS steps map those
// perturbations to the output with an amplification A that depends on the matrix and the
// coefficients but not on u (first order). A is not known a priori (the worst-case Lipschitz
// product of the quintics, ~500, would make every bound vacuous), so it is measured per case on
// the CPU: d = |NS_bf16 - NS_fp32| / |NS_fp32| with both CPU variants, where bf16 rounds every
// GEMM input to nearest (7 mantissa bits), so d ~ A * 2^-8. Then:
//   fp32 vs CPU fp32: only the summation order differs, ~ sqrt(k) 2^-24 per product (random
//     rounding errors, k the inner dimension), so ~ d sqrt(k) 2^-16; allowed d sqrt(k) 2^-12.
//   TF32 vs CPU fp32: 10 mantissa bits; the tensor cores may truncate the dropped bits rather than
//     round (a biased error up to 2^-10), which puts the estimate anywhere from d / 8 to about
//     d / 2; allowed 2 d.
//   bf16 vs CPU bf16: the same values are rounded at the same points (cuBLAS rounds its fp32
//     accumulation once on output where the CPU rounds its fp32 result); the runs first differ only
//     where the two fp32 accumulations straddle a bf16 rounding boundary, but each such flip
//     changes the inputs of every later rounding, so after five steps the two can differ as much
//     as two independent rounding sequences, ~ sqrt(2) d; allowed 2 d. (On the CPU, bf16 with
//     ssyrk against the same products as column-major GEMMs ended up to 0.32 d apart.)
// A CPU-only test checks that d is nonzero and below 0.1 for every case, so each allowance is
// below 0.2 while a transposed operand, a missing term or a wrong coefficient moves the result by
// O(1); the fp32 comparison is far tighter than that.
#include "shardwise/cuda/newton_schulz_cuda.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "cuda_test_support.hpp"
#include "shardwise/cuda/device_buffer.hpp"

namespace shardwise::cuda {
namespace {

using optim::MatmulPrecision;
using optim::NewtonSchulzOptions;
using optim::NsCoefficients;

struct Shape {
  std::int64_t rows, cols;
  std::int64_t numel() const { return rows * cols; }
  std::int64_t inner() const { return rows > cols ? rows : cols; }  // the GEMMs' largest k
  std::string name() const { return std::to_string(rows) + "x" + std::to_string(cols); }
};

const Shape kShapes[] = {{64, 64},  {96, 200}, {200, 96}, {37, 129},
                         {129, 37}, {1, 50},   {50, 1},   {257, 515}};
const NsCoefficients kSets[] = {NsCoefficients::kQuintic, NsCoefficients::kSimple,
                                NsCoefficients::kPolarExpress};

std::vector<float> cpu_ns(const std::vector<float>& g, Shape s, NewtonSchulzOptions o) {
  std::vector<float> out(g.size());
  optim::NewtonSchulz(o).orthogonalize(g.data(), s.rows, s.cols, out.data());
  return out;
}

std::vector<float> gpu_ns(NewtonSchulzCuda& ns, const std::vector<float>& g, Shape s) {
  const DeviceBuffer in = to_device(g);
  DeviceBuffer out(g.size() * sizeof(float));
  ns.orthogonalize(in.as<float>(), s.rows, s.cols, out.as<float>());
  synchronize();
  return to_host<float>(out, g.size());
}

std::vector<float> gpu_ns(const std::vector<float>& g, Shape s, NewtonSchulzOptions o, bool tf32,
                          NewtonSchulzCudaTuning tuning = {}) {
  NewtonSchulzCuda ns(o, tf32);
  ns.set_tuning(tuning);
  return gpu_ns(ns, g, s);
}

// The symmetric products' routes (use_syrk): the defaults (plain GEMMs at these sizes),
// cublasSsyrk wherever it applies (fp32 without TF32), and GEMMs on blocks everywhere.
struct Route {
  const char* name;
  NewtonSchulzCudaTuning tuning;
};
const Route kRoutes[] = {
    {"default", {}},
    {"ssyrk", {.syrk_min_side = 1, .min_block = 8, .max_levels = 3}},
    {"blocks", {.syrk_min_side = 1 << 30, .min_block = 8, .max_levels = 3}},
};

double relative_distance(const std::vector<float>& a, const std::vector<float>& ref) {
  double diff = 0.0, norm = 0.0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double d = static_cast<double>(a[i]) - ref[i];
    diff += d * d;
    norm += static_cast<double>(ref[i]) * ref[i];
  }
  return std::sqrt(diff / norm);
}

NewtonSchulzOptions options(NsCoefficients set, MatmulPrecision precision, bool syrk,
                            int steps = 5) {
  NewtonSchulzOptions o;
  o.coefficients = set;
  o.precision = precision;
  o.use_syrk = syrk;
  o.steps = steps;
  return o;
}

// The CPU results a case is judged against and the measured bf16 sensitivity d.
struct Reference {
  std::vector<float> fp32, bf16;
  double d;
};

Reference reference(const std::vector<float>& g, Shape s, NsCoefficients set, int steps = 5) {
  Reference r;
  r.fp32 = cpu_ns(g, s, options(set, MatmulPrecision::kFp32, true, steps));
  r.bf16 = cpu_ns(g, s, options(set, MatmulPrecision::kBf16, true, steps));
  r.d = relative_distance(r.bf16, r.fp32);
  return r;
}

double fp32_allowance(const Reference& r, Shape s) {
  return r.d * std::sqrt(static_cast<double>(s.inner())) * std::ldexp(1.0, -12);
}

std::vector<float> input_for(Shape s, std::uint32_t seed) {
  return test::normal_values(static_cast<std::size_t>(s.numel()), 0.02f, seed);
}

// Runs without a GPU: the premise of the allowances (d small, and nonzero) on every case.
TEST(NewtonSchulzCudaTolerance, Bf16SensitivityIsSmallAndNonzero) {
  std::uint32_t seed = 1;
  for (const Shape& s : kShapes) {
    for (NsCoefficients set : kSets) {
      const Reference r = reference(input_for(s, seed++), s, set);
      EXPECT_GT(r.d, 1e-5) << s.name() << " " << optim::ns_coefficients_name(set);
      EXPECT_LT(r.d, 0.1) << s.name() << " " << optim::ns_coefficients_name(set);
    }
  }
}

TEST(NewtonSchulzCuda, MatchesCpuForEveryShapeSetAndPrecision) {
  SW_SKIP_WITHOUT_GPU();
  std::uint32_t seed = 1;
  for (const Shape& s : kShapes) {
    for (NsCoefficients set : kSets) {
      SCOPED_TRACE(s.name() + " " + std::string(optim::ns_coefficients_name(set)));
      const std::vector<float> g = input_for(s, seed++);
      const Reference r = reference(g, s, set);
      for (bool syrk : {true, false}) {
        for (const Route& route : kRoutes) {
          SCOPED_TRACE(std::string(syrk ? "syrk " : "gemm ") + route.name);
          const auto fp32 = options(set, MatmulPrecision::kFp32, syrk);
          EXPECT_LE(relative_distance(gpu_ns(g, s, fp32, false, route.tuning), r.fp32),
                    fp32_allowance(r, s))
              << "fp32, d = " << r.d;
          EXPECT_LE(relative_distance(gpu_ns(g, s, fp32, true, route.tuning), r.fp32), 2 * r.d)
              << "tf32, d = " << r.d;
          const auto bf16 = options(set, MatmulPrecision::kBf16, syrk);
          EXPECT_LE(relative_distance(gpu_ns(g, s, bf16, false, route.tuning), r.bf16), 2 * r.d)
              << "bf16, d = " << r.d;
        }
      }
    }
  }
}

// Gram Newton-Schulz on the GPU against the CPU Gram path and the CPU standard path, every
// precision and route, with the default restarts and with a restart before every step. d here is
// the CPU Gram path's own bf16 sensitivity; the Gram form amplifies rounding by up to ||Q|| ||X||
// (optim/newton_schulz_gram.hpp), so fp32 gets 16x the standard allowance (the host emulation
// measured below 2x) and bf16 3 d (measured up to 2 d there).
TEST(NewtonSchulzCuda, GramMatchesCpu) {
  SW_SKIP_WITHOUT_GPU();
  std::uint32_t seed = 200;
  for (const Shape& s : {Shape{64, 64}, Shape{96, 200}, Shape{200, 96}, Shape{37, 129}}) {
    for (NsCoefficients set : kSets) {
      for (double limit : {0.0, 1.5}) {
        SCOPED_TRACE(s.name() + " " + std::string(optim::ns_coefficients_name(set)) + " limit " +
                     std::to_string(limit));
        const std::vector<float> g = input_for(s, seed++);
        auto fp32 = options(set, MatmulPrecision::kFp32, true);
        fp32.algorithm = optim::NsAlgorithm::kGram;
        fp32.gram_growth_limit = limit;
        auto bf16 = fp32;
        bf16.precision = MatmulPrecision::kBf16;
        Reference r;
        r.fp32 = cpu_ns(g, s, fp32);
        r.bf16 = cpu_ns(g, s, bf16);
        r.d = relative_distance(r.bf16, r.fp32);
        const std::vector<float> standard =
            cpu_ns(g, s, options(set, MatmulPrecision::kFp32, true));
        for (const Route& route : kRoutes) {
          SCOPED_TRACE(route.name);
          const std::vector<float> gpu = gpu_ns(g, s, fp32, false, route.tuning);
          EXPECT_LE(relative_distance(gpu, r.fp32), 16 * fp32_allowance(r, s)) << "d = " << r.d;
          EXPECT_LE(relative_distance(gpu, standard),
                    relative_distance(r.fp32, standard) + 16 * fp32_allowance(r, s));
          EXPECT_LE(relative_distance(gpu_ns(g, s, fp32, true, route.tuning), r.fp32), 2 * r.d)
              << "tf32, d = " << r.d;
          EXPECT_LE(relative_distance(gpu_ns(g, s, bf16, false, route.tuning), r.bf16), 3 * r.d)
              << "bf16, d = " << r.d;
        }
      }
    }
  }
}

// Polar Express past the end of its table repeats its last polynomial, as the CPU does.
TEST(NewtonSchulzCuda, MoreStepsThanTheCoefficientTable) {
  SW_SKIP_WITHOUT_GPU();
  const Shape s{48, 80};
  const std::vector<float> g = input_for(s, 77);
  const Reference r = reference(g, s, NsCoefficients::kPolarExpress, 11);
  const auto o = options(NsCoefficients::kPolarExpress, MatmulPrecision::kFp32, true, 11);
  EXPECT_LE(relative_distance(gpu_ns(g, s, o, false), r.fp32), fp32_allowance(r, s));
}

// steps = 0 is the normalisation alone: one fp64 sum (summed in another order), one fp32 product.
TEST(NewtonSchulzCuda, ZeroStepsIsTheNormalisation) {
  SW_SKIP_WITHOUT_GPU();
  const Shape s{33, 70};
  const std::vector<float> g = input_for(s, 5);
  const auto o = options(NsCoefficients::kQuintic, MatmulPrecision::kFp32, true, 0);
  EXPECT_LE(relative_distance(gpu_ns(g, s, o, false), cpu_ns(g, s, o)), 1e-6);
}

TEST(NewtonSchulzCuda, ZeroMatrixMapsToZero) {
  SW_SKIP_WITHOUT_GPU();
  const Shape s{16, 24};
  for (MatmulPrecision p : {MatmulPrecision::kFp32, MatmulPrecision::kBf16}) {
    const std::vector<float> out =
        gpu_ns(std::vector<float>(384, 0.0f), s, options(NsCoefficients::kQuintic, p, true), false);
    for (float x : out) ASSERT_EQ(x, 0.0f);
  }
}

// One object across shapes (the workspace grows, then is reused smaller): the same bits as a
// fresh object for each (cuBLAS is bitwise reproducible on one GPU with one stream), and out may
// alias g.
TEST(NewtonSchulzCuda, WorkspaceReuseAndAliasing) {
  SW_SKIP_WITHOUT_GPU();
  for (MatmulPrecision p : {MatmulPrecision::kFp32, MatmulPrecision::kBf16}) {
    const auto o = options(NsCoefficients::kQuintic, p, true);
    NewtonSchulzCuda reused(o);
    std::uint32_t seed = 40;
    for (const Shape& s : {Shape{200, 96}, Shape{20, 30}, Shape{96, 200}, Shape{20, 30}}) {
      const std::vector<float> g = input_for(s, seed++);
      const std::vector<float> fresh = gpu_ns(g, s, o, false);
      EXPECT_EQ(test::first_bit_difference(gpu_ns(reused, g, s), fresh), "") << s.name();
      DeviceBuffer inout = to_device(g);
      reused.orthogonalize(inout.as<float>(), s.rows, s.cols, inout.as<float>());
      synchronize();
      EXPECT_EQ(test::first_bit_difference(to_host<float>(inout, g.size()), fresh), "")
          << "aliased " << s.name();
    }
  }
}

TEST(NewtonSchulzCuda, RowBlocksMatchCpu) {
  SW_SKIP_WITHOUT_GPU();
  const Shape s{112, 64};  // Q, K, V of 64, 24 and 24 rows
  const std::vector<std::int64_t> split = {64, 24, 24};
  const std::vector<float> g = input_for(s, 9);
  const auto o = options(NsCoefficients::kQuintic, MatmulPrecision::kFp32, true);
  std::vector<float> cpu(g.size());
  optim::NewtonSchulz(o).orthogonalize_row_blocks(g.data(), s.rows, s.cols, split, cpu.data());
  NewtonSchulzCuda ns(o);
  DeviceBuffer inout = to_device(g);
  ns.orthogonalize_row_blocks(inout.as<float>(), s.rows, s.cols, split, inout.as<float>());
  synchronize();
  const std::vector<float> gpu = to_host<float>(inout, g.size());
  // Each block is judged on its own, against its own measured sensitivity.
  std::int64_t first = 0;
  for (std::int64_t rows : split) {
    const Shape block{rows, s.cols};
    const auto begin = static_cast<std::ptrdiff_t>(first * s.cols);
    const auto end = static_cast<std::ptrdiff_t>((first + rows) * s.cols);
    const std::vector<float> part_g(g.begin() + begin, g.begin() + end);
    const Reference r = reference(part_g, block, NsCoefficients::kQuintic);
    EXPECT_LE(relative_distance({gpu.begin() + begin, gpu.begin() + end},
                                {cpu.begin() + begin, cpu.begin() + end}),
              fp32_allowance(r, block))
        << "block at row " << first;
    first += rows;
  }
  EXPECT_THROW(ns.orthogonalize_row_blocks(inout.as<float>(), s.rows, s.cols,
                                           std::vector<std::int64_t>{64, 24}, inout.as<float>()),
               ShapeError);
}

TEST(NewtonSchulzCuda, WithoutGpuConstructionThrowsCudaError) {
  if (gpu_available()) GTEST_SKIP() << "a GPU is present";
  EXPECT_THROW(NewtonSchulzCuda{}, CudaError);
}

}  // namespace
}  // namespace shardwise::cuda
