// The device GPT's host code (src/cuda/gpt_model_cuda*.cpp, device_gemm.cpp) run on the CPU
// against the stand-ins in shims/ (every cuBLAS product as a CBLAS column-major product with the
// very arguments given to cuBLAS, each kernel's specification as a loop, host memory as device
// memory, NaN in every buffer until written), compared with GptModel<float>. It checks, without a
// GPU, the operands, transpose flags, leading dimensions and batch strides of every product, the
// head layout and rotary directions, which buffer holds what when, and the grad_ready order.
// Tolerances: fp32 differs from the CPU model in summation order only (other BLAS kernels, the
// stand-ins' plain loops): 1e-4 relative, with the floor of gpt_model_cuda_test.cpp for
// cancelling gradients. bf16: 2 G 2^-8 as in that test (G products on the longest chain).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "shardwise/cuda/gpt_model_cuda.hpp"
#include "shardwise/model/gpt_model.hpp"

namespace shardwise::cuda {
namespace {

struct EmulatedRun {
  double loss = 0;
  std::vector<std::vector<float>> grads;
  std::vector<ParamId> order;
  std::vector<bool> exact;
  std::vector<std::vector<float>> probabilities;  // one position per sequence
};

GptConfig emulated_config(bool rope, bool tied) {
  GptConfig c;
  c.vocab_size = 37;
  c.seq_len = 8;
  c.num_layers = 2;
  c.hidden = 32;
  c.num_heads = 4;
  c.ffn_hidden = 64;
  c.rope = rope;
  c.tied_embeddings = tied;
  return c;
}

template <typename Model>
EmulatedRun run_model(Model& model, const std::vector<std::int32_t>& tokens,
                      const std::vector<std::int32_t>& targets, int batch, int seq) {
  std::vector<std::vector<float>> values, grads;
  for (const ParamInfo& p : model.params()) {
    values.emplace_back(static_cast<std::size_t>(p.numel()), 0.0f);
    grads.emplace_back(static_cast<std::size_t>(p.numel()), 0.0f);
  }
  std::vector<float*> vp, gp;
  for (std::size_t i = 0; i < values.size(); ++i) {
    vp.push_back(values[i].data());
    gp.push_back(grads[i].data());
  }
  model.bind(vp, gp);
  model.init_parameters(7);
  EmulatedRun r;
  r.loss = model.forward(tokens.data(), targets.data(), batch, seq);
  r.exact = model.exact_match();
  for (int b = 0; b < batch; ++b) {
    const auto p = model.probabilities(b, seq - 1 - b);
    r.probabilities.emplace_back(p.begin(), p.end());
  }
  model.backward(1.5, [&](ParamId id) { r.order.push_back(id); });
  r.grads = grads;
  return r;
}

double l2(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += static_cast<double>(x) * x;
  return std::sqrt(s);
}

struct EmulatedCase {
  bool rope, tied;
  GemmPrecision precision;
};

class GptModelCudaEmulation : public ::testing::TestWithParam<EmulatedCase> {};

TEST_P(GptModelCudaEmulation, MatchesCpuModel) {
  const EmulatedCase k = GetParam();
  const GptConfig c = emulated_config(k.rope, k.tied);
  const int batch = 2, seq = c.seq_len;
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> token(0, c.vocab_size - 1);
  std::vector<std::int32_t> tokens, targets;
  for (int i = 0; i < batch * seq; ++i) {
    tokens.push_back(token(rng));
    targets.push_back(i % 5 == 2 ? -1 : token(rng));
  }
  GptModel<float> cpu_model(c);
  const EmulatedRun cpu = run_model(cpu_model, tokens, targets, batch, seq);
  GptCudaOptions options;
  options.precision = k.precision;
  GptModelCuda device_model(c, options);
  const EmulatedRun dev = run_model(device_model, tokens, targets, batch, seq);
  const double tol =
      k.precision == GemmPrecision::kBf16 ? 2 * 2.0 * (6 * c.num_layers + 1) / 256.0 : 1e-4;
  EXPECT_NEAR(dev.loss, cpu.loss, tol * cpu.loss);
  EXPECT_EQ(dev.order, cpu.order);
  EXPECT_EQ(dev.exact, cpu.exact);
  for (std::size_t b = 0; b < cpu.probabilities.size(); ++b) {
    ASSERT_EQ(dev.probabilities[b].size(), static_cast<std::size_t>(c.vocab_size));
    for (std::size_t v = 0; v < cpu.probabilities[b].size(); ++v) {
      EXPECT_NEAR(dev.probabilities[b][v], cpu.probabilities[b][v], tol * cpu.probabilities[b][v])
          << "sequence " << b << ", token " << v;
    }
  }
  double sum_sq = 0, count = 0;
  for (const auto& g : cpu.grads) {
    sum_sq += l2(g) * l2(g);
    count += static_cast<double>(g.size());
  }
  const double rms = std::sqrt(sum_sq / count);
  for (std::size_t i = 0; i < cpu.grads.size(); ++i) {
    double diff = 0;
    for (std::size_t e = 0; e < cpu.grads[i].size(); ++e) {
      const double d = static_cast<double>(dev.grads[i][e]) - cpu.grads[i][e];
      diff += d * d;
    }
    const double floor = rms * std::sqrt(static_cast<double>(cpu.grads[i].size()));
    EXPECT_LE(std::sqrt(diff), tol * (l2(cpu.grads[i]) + floor))
        << device_model.params()[i].name << ": |reference| " << l2(cpu.grads[i]);
  }
}

INSTANTIATE_TEST_SUITE_P(Configs, GptModelCudaEmulation,
                         ::testing::Values(EmulatedCase{false, true, GemmPrecision::kFp32},
                                           EmulatedCase{true, true, GemmPrecision::kFp32},
                                           EmulatedCase{false, false, GemmPrecision::kFp32},
                                           EmulatedCase{true, false, GemmPrecision::kFp32},
                                           EmulatedCase{false, true, GemmPrecision::kBf16},
                                           EmulatedCase{true, false, GemmPrecision::kBf16}),
                         [](const ::testing::TestParamInfo<EmulatedCase>& info) {
                           return std::string(info.param.rope ? "rope" : "learned") +
                                  (info.param.tied ? "_tied_" : "_untied_") +
                                  to_string(info.param.precision);
                         });

}  // namespace
}  // namespace shardwise::cuda
