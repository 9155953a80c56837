// MuonCuda::step against optim::Muon on the CPU, two steps on the same grads: every scale mode,
// Nesterov on and off, weight decay on and off, wide, tall and QKV-split weights.
// The momentum buffer depends only on the grads through fp32 operations done in the CPU's order,
// so it must match bit for bit. The params differ only through Newton-Schulz: after two steps
// |p_gpu - p_cpu| <= sum over steps of lr * scale * |NS_gpu(u) - NS_cpu(u)| (weight decay
// multiplies by <= 1, the element-wise operations are the CPU's), and newton_schulz_cuda_test's
// fp32 allowance bounds |NS_gpu - NS_cpu| / |NS_cpu| by d sqrt(k) 2^-12 with d < 0.1 on all its
// cases: the test allows, relative to the size of the two updates, 0.1 sqrt(k) 2^-12 (plus the
// final fp32 roundings of p, one ulp of max |p| per element). Skips without a GPU.
#include "shardwise/cuda/muon_cuda.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "cuda_test_support.hpp"
#include "shardwise/cuda/device_buffer.hpp"

namespace shardwise::cuda {
namespace {

using optim::MuonScaleMode;

struct MuonCase {
  std::int64_t rows, cols;
  std::vector<std::int64_t> qkv_split;
  MuonScaleMode mode;
  bool nesterov;
  double weight_decay;
};

double frobenius(const std::vector<float>& a, const std::vector<float>& b) {
  double sum = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double d = static_cast<double>(a[i]) - b[i];
    sum += d * d;
  }
  return std::sqrt(sum);
}

void run_case(const MuonCase& c, std::uint32_t seed) {
  SCOPED_TRACE(std::to_string(c.rows) + "x" + std::to_string(c.cols) + " mode " +
               std::string(optim::muon_scale_mode_name(c.mode)) + (c.nesterov ? " nesterov" : "") +
               " wd " + std::to_string(c.weight_decay));
  const auto n = static_cast<std::size_t>(c.rows * c.cols);
  const std::vector<float> start = test::normal_values(n, 0.05f, seed);
  const std::vector<float> grad1 = test::normal_values(n, 1e-2f, seed + 1);
  const std::vector<float> grad2 = test::normal_values(n, 1e-2f, seed + 2);
  optim::MuonOptions o;
  o.lr = 0.02;
  o.weight_decay = c.weight_decay;
  o.nesterov = c.nesterov;
  o.scale_mode = c.mode;
  o.extra_scale_factor = 0.7;

  std::vector<float> cpu_param = start, cpu_grad = grad1;
  optim::OptimParam p{"w", {c.rows, c.cols}, cpu_param.data(), cpu_grad.data(), c.qkv_split};
  optim::Muon cpu(optim::single_group({p}), o);

  MuonCuda gpu(o);
  DeviceBuffer param = to_device(start), grad = to_device(grad1);
  DeviceBuffer momentum = to_device(std::vector<float>(n, 0.0f));
  const MuonDeviceParam dp{
      c.rows, c.cols, param.as<float>(), grad.as<float>(), momentum.as<float>(), c.qkv_split};
  for (const std::vector<float>* g : {&grad1, &grad2}) {
    cpu_grad = *g;
    copy_to_device(grad.data(), g->data(), n * sizeof(float));
    cpu.step_with_ready_grads();
    gpu.step(dp, o.lr, o.weight_decay, o.momentum);
  }
  synchronize();
  const std::vector<float> cpu_momentum = cpu.state_dict().at("w").at("momentum_buffer");
  EXPECT_EQ(test::first_bit_difference(to_host<float>(momentum, n), cpu_momentum), "");

  // The two updates' size: |start * decay^2 - p_cpu| bounds it within weight decay's change.
  const double k = static_cast<double>(c.rows > c.cols ? c.rows : c.cols);
  double max_abs = 0.0;
  for (float x : cpu_param) max_abs = std::fmax(max_abs, std::fabs(x));
  const double update = frobenius(start, cpu_param);
  const double allowed = 0.1 * std::sqrt(k) * std::ldexp(1.0, -12) * update +
                         std::sqrt(static_cast<double>(n)) * max_abs * std::ldexp(1.0, -23);
  EXPECT_LE(frobenius(to_host<float>(param, n), cpu_param), allowed) << "update size " << update;
}

TEST(MuonCuda, StepMatchesCpuMuon) {
  SW_SKIP_WITHOUT_GPU();
  std::uint32_t seed = 100;
  for (MuonScaleMode mode : {MuonScaleMode::kSpectral, MuonScaleMode::kUnitRmsNorm,
                             MuonScaleMode::kShapeScaling, MuonScaleMode::kAdamwMatchedRms}) {
    run_case({48, 96, {}, mode, false, 0.1}, seed += 3);
    run_case({96, 48, {}, mode, true, 0.0}, seed += 3);
    run_case({80, 32, {32, 24, 24}, mode, true, 0.1}, seed += 3);
  }
}

TEST(MuonCuda, RejectsWhatTheDeviceDoesNotDo) {
  optim::MuonOptions o;
  o.tensor_parallel["w"] = {};
  EXPECT_THROW(MuonCuda{o}, InvalidArgument);  // checked before cuBLAS starts: no GPU needed
}

}  // namespace
}  // namespace shardwise::cuda
