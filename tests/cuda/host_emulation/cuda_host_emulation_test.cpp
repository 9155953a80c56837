// The host code around cuBLAS (src/cuda/newton_schulz_cuda.cpp, muon_cuda.cpp) run on the CPU:
// this binary compiles those two files against the stand-ins in shims/ (CBLAS column-major
// products with the very arguments given to cuBLAS, each kernel's specification as a loop, host
// memory as device memory; see cmake/cuda_host_emulation_test.cmake), so it checks, without a GPU
// and even without nvcc, what the GPU tests cannot check here: the operand order, transpose flags
// and leading dimensions of every product for wide and tall matrices, the SYRK triangle and its
// mirror, the bf16 rounding points, the workspace, the QKV split and the Muon scale.
// Tolerances: the emulation runs the CPU path's fp32 arithmetic through the same BLAS library,
// only through other kernels (column-major, other transpose flags), so fp32 results differ by
// summation order alone: 2^-12 sqrt(k) d as in newton_schulz_cuda_test (d: that case's bf16
// sensitivity, measured). bf16 is compared with the CPU's all-GEMM variant, which rounds the same
// values; the GPU test's 2 d applies.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "shardwise/cuda/muon_cuda.hpp"
#include "shardwise/cuda/newton_schulz_cuda.hpp"

namespace shardwise::cuda {
namespace {

using optim::MatmulPrecision;
using optim::NsCoefficients;

std::vector<float> random_matrix(std::int64_t rows, std::int64_t cols, float scale,
                                 std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(static_cast<std::size_t>(rows * cols));
  for (float& x : v) x = normal(rng);
  return v;
}

double relative_distance(const std::vector<float>& a, const std::vector<float>& ref) {
  double diff = 0.0, norm = 0.0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    diff += (static_cast<double>(a[i]) - ref[i]) * (static_cast<double>(a[i]) - ref[i]);
    norm += static_cast<double>(ref[i]) * ref[i];
  }
  return std::sqrt(diff / norm);
}

std::vector<float> cpu_ns(const std::vector<float>& g, std::int64_t rows, std::int64_t cols,
                          optim::NewtonSchulzOptions o) {
  std::vector<float> out(g.size());
  optim::NewtonSchulz(o).orthogonalize(g.data(), rows, cols, out.data());
  return out;
}

// The symmetric products' routes: the defaults (plain GEMMs at these sizes), cublasSsyrk, and
// GEMMs on blocks (fp32 with TF32 takes the blocks too; the emulation computes in fp32 anyway).
struct Route {
  const char* name;
  bool tf32;
  NewtonSchulzCudaTuning tuning;
};
const Route kRoutes[] = {
    {"default", false, {}},
    {"ssyrk", false, {.syrk_min_side = 1, .min_block = 8, .max_levels = 3}},
    {"blocks", false, {.syrk_min_side = 1 << 30, .min_block = 8, .max_levels = 3}},
    {"tf32 blocks", true, {.syrk_min_side = 1, .min_block = 8, .max_levels = 2}},
};

TEST(CudaHostEmulation, NewtonSchulzMatchesCpu) {
  const std::pair<std::int64_t, std::int64_t> shapes[] = {
      {64, 64}, {96, 200}, {200, 96}, {37, 129}, {129, 37}, {1, 50}, {50, 1}, {70, 33}, {40, 90}};
  std::uint32_t seed = 1;
  for (const auto& [rows, cols] : shapes) {
    for (NsCoefficients set :
         {NsCoefficients::kQuintic, NsCoefficients::kSimple, NsCoefficients::kPolarExpress}) {
      SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(cols) + " " +
                   std::string(optim::ns_coefficients_name(set)));
      const std::vector<float> g = random_matrix(rows, cols, 0.02f, seed++);
      optim::NewtonSchulzOptions o;
      o.coefficients = set;
      const std::vector<float> fp32 = cpu_ns(g, rows, cols, o);
      o.precision = MatmulPrecision::kBf16;
      o.use_syrk = false;
      const std::vector<float> bf16 = cpu_ns(g, rows, cols, o);
      const double d = relative_distance(bf16, fp32);
      const double k = static_cast<double>(rows > cols ? rows : cols);
      for (bool syrk : {true, false}) {
        for (const Route& route : kRoutes) {
          for (MatmulPrecision p : {MatmulPrecision::kFp32, MatmulPrecision::kBf16}) {
            o.precision = p;
            o.use_syrk = syrk;
            NewtonSchulzCuda ns(o, route.tf32);
            ns.set_tuning(route.tuning);
            std::vector<float> out(g.size());
            ns.orthogonalize(g.data(), rows, cols, out.data());
            const bool is_bf16 = p == MatmulPrecision::kBf16;
            EXPECT_LE(relative_distance(out, is_bf16 ? bf16 : fp32),
                      is_bf16 ? 2 * d : d * std::sqrt(k) * std::ldexp(1.0, -12))
                << (syrk ? "syrk " : "gemm ") << route.name << (is_bf16 ? " bf16" : " fp32")
                << ", d = " << d;
            // The workspace, grown for this shape, then used for a smaller one and this one again.
            std::vector<float> small(12), again(g.size());
            ns.orthogonalize(g.data(), 3, 4, small.data());
            ns.orthogonalize(g.data(), rows, cols, again.data());
            EXPECT_EQ(again, out);
          }
        }
      }
    }
  }
}

// Gram Newton-Schulz: the emulated GPU path against the CPU Gram path (same restarts, same
// rounding points) on every route, restarted before every step too. The Gram form amplifies
// rounding by up to ||Q|| ||X|| (optim/newton_schulz_gram.hpp): fp32 is allowed 16x the
// standard's allowance (measured below 2x), bf16 3 d (measured up to 2 d).
TEST(CudaHostEmulation, GramNewtonSchulzMatchesCpu) {
  const std::pair<std::int64_t, std::int64_t> shapes[] = {{64, 64}, {40, 120}, {120, 40}, {37, 90}};
  std::uint32_t seed = 70;
  for (const auto& [rows, cols] : shapes) {
    for (NsCoefficients set :
         {NsCoefficients::kQuintic, NsCoefficients::kSimple, NsCoefficients::kPolarExpress}) {
      for (double limit : {0.0, 1.5}) {
        SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(cols) + " " +
                     std::string(optim::ns_coefficients_name(set)) + " limit " +
                     std::to_string(limit));
        const std::vector<float> g = random_matrix(rows, cols, 0.02f, seed++);
        optim::NewtonSchulzOptions o;
        o.coefficients = set;
        o.algorithm = optim::NsAlgorithm::kGram;
        o.gram_growth_limit = limit;
        const std::vector<float> fp32 = cpu_ns(g, rows, cols, o);
        o.precision = MatmulPrecision::kBf16;
        const std::vector<float> bf16 = cpu_ns(g, rows, cols, o);
        const double d = relative_distance(bf16, fp32);
        const double k = static_cast<double>(rows > cols ? rows : cols);
        for (const Route& route : kRoutes) {
          for (MatmulPrecision p : {MatmulPrecision::kFp32, MatmulPrecision::kBf16}) {
            o.precision = p;
            NewtonSchulzCuda ns(o, route.tf32);
            ns.set_tuning(route.tuning);
            std::vector<float> out(g.size());
            ns.orthogonalize(g.data(), rows, cols, out.data());
            const bool is_bf16 = p == MatmulPrecision::kBf16;
            const double distance = relative_distance(out, is_bf16 ? bf16 : fp32);
            EXPECT_LE(distance, is_bf16 ? 3 * d : 16 * d * std::sqrt(k) * std::ldexp(1.0, -12))
                << route.name << (is_bf16 ? " bf16" : " fp32") << ", d = " << d;
          }
        }
      }
    }
  }
}

TEST(CudaHostEmulation, MuonStepMatchesCpuMuon) {
  struct Case {
    std::int64_t rows, cols;
    std::vector<std::int64_t> split;
    bool nesterov;
    double weight_decay;
  };
  std::uint32_t seed = 50;
  for (optim::MuonScaleMode mode :
       {optim::MuonScaleMode::kSpectral, optim::MuonScaleMode::kUnitRmsNorm,
        optim::MuonScaleMode::kShapeScaling, optim::MuonScaleMode::kAdamwMatchedRms}) {
    for (const Case& c : {Case{48, 96, {}, false, 0.1}, Case{96, 48, {}, true, 0.0},
                          Case{80, 32, {32, 24, 24}, true, 0.1}}) {
      SCOPED_TRACE(std::to_string(c.rows) + "x" + std::to_string(c.cols) + " " +
                   std::string(optim::muon_scale_mode_name(mode)));
      const std::vector<float> start = random_matrix(c.rows, c.cols, 0.05f, seed++);
      const std::vector<float> grads[] = {random_matrix(c.rows, c.cols, 0.01f, seed++),
                                          random_matrix(c.rows, c.cols, 0.01f, seed++)};
      optim::MuonOptions o;
      o.weight_decay = c.weight_decay;
      o.nesterov = c.nesterov;
      o.scale_mode = mode;
      o.extra_scale_factor = 0.7;
      std::vector<float> cpu_param = start, cpu_grad = grads[0];
      optim::Muon cpu(optim::single_group({optim::OptimParam{
                          "w", {c.rows, c.cols}, cpu_param.data(), cpu_grad.data(), c.split}}),
                      o);
      MuonCuda emulated(o);
      std::vector<float> param = start, grad = grads[0], momentum(start.size(), 0.0f);
      const MuonDeviceParam p{c.rows, c.cols, param.data(), grad.data(), momentum.data(), c.split};
      for (const std::vector<float>& g : grads) {
        cpu_grad = g;
        grad = g;
        cpu.step_with_ready_grads();
        emulated.step(p, o.lr, o.weight_decay, o.momentum);
      }
      EXPECT_EQ(momentum, cpu.state_dict().at("w").at("momentum_buffer"));
      // The updates' size bounds the NS difference's effect (fp32 allowance at d < 0.1).
      double update = 0.0, diff = 0.0;
      for (std::size_t i = 0; i < start.size(); ++i) {
        update += (static_cast<double>(start[i]) - cpu_param[i]) * (start[i] - cpu_param[i]);
        diff += (static_cast<double>(param[i]) - cpu_param[i]) * (param[i] - cpu_param[i]);
      }
      const double k = static_cast<double>(c.rows > c.cols ? c.rows : c.cols);
      EXPECT_LE(std::sqrt(diff), 0.1 * std::sqrt(k) * std::ldexp(1.0, -12) * std::sqrt(update) +
                                     std::sqrt(static_cast<double>(start.size())) * 1e-7);
    }
  }
}

}  // namespace
}  // namespace shardwise::cuda
