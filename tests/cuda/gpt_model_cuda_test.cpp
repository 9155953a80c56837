// GptModelCuda against the CPU model (GptModel<float>): loss, every parameter's gradient, the
// grad_ready order, exact match and a few SGD steps, on small configs (learned positions and RoPE,
// tied and untied embeddings, a vocabulary of 37 that no block size divides; the CPU model pads
// the vocabulary only under tensor parallelism, so there is no padding at tp = 1).
//
// Tolerances (relative, in the 2-norm of each parameter's gradient):
// - fp32 (TF32 off): only the order of the sums differs (cuBLAS's blocking, warp reductions, the
//   atomic embedding scatter) plus a few ulp in exp. A sum of K terms in any order is within
//   K u (u = 2^-24) of the exact one relative to the sum of |terms|; the longest dependency chain
//   of forward and backward passes through P = 2 (6 L + 2) such stages (six products or norms
//   per block, the embedding and the head), each with K <= max(rows, vocab, ffn, hidden, seq).
//   tol = P K u: a worst-case bound, far above the typical sqrt(K) u per stage.
// - TF32: each product's inputs keep 10 mantissa bits (relative error up to 2^-10 each, two
//   inputs per term); over the G = 2 (6 L + 1) products of the longest chain tol = 2 G 2^-10.
// - bf16: the same with bf16's 8 bits of precision, 2^-8: tol = 2 G 2^-8 (0.2 at L = 2: loose,
//   but a wrong operand, transpose or missing term moves a gradient by O(1)).
// Parameters whose gradient nearly cancels (the key bias: softmax ignores a per-row shift of the
// scores) are measured against a floor: the model's RMS gradient times sqrt(numel).
#include "shardwise/cuda/gpt_model_cuda.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "cuda_test_support.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/cuda/device_buffer.hpp"
#include "shardwise/model/gpt_model.hpp"

namespace shardwise::cuda {
namespace {

struct Batch {
  int batch = 2, seq = 8;
  std::vector<std::int32_t> tokens, targets;
};

GptConfig small_config(bool rope, bool tied) {
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

Batch random_batch(const GptConfig& c, std::uint32_t seed) {
  Batch b;
  b.seq = c.seq_len;
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> token(0, c.vocab_size - 1);
  const auto n = static_cast<std::size_t>(b.batch) * b.seq;
  for (std::size_t i = 0; i < n; ++i) {
    b.tokens.push_back(token(rng));
    b.targets.push_back(i % 5 == 3 ? -1 : token(rng));  // a few ignored targets
  }
  return b;
}

// Host storage of every parameter (values and gradients), one array each.
struct HostParams {
  std::vector<std::vector<float>> values, grads;
  explicit HostParams(const ParamList& params) {
    for (const ParamInfo& p : params) {
      values.emplace_back(static_cast<std::size_t>(p.numel()), 0.0f);
      grads.emplace_back(static_cast<std::size_t>(p.numel()), 0.0f);
    }
  }
  std::vector<float*> pointers(std::vector<std::vector<float>>& arrays) {
    std::vector<float*> out;
    for (auto& a : arrays) out.push_back(a.data());
    return out;
  }
};

// Device storage: all values in one buffer, all gradients in another (views, as DDP binds).
struct DeviceParams {
  DeviceBuffer values, grads;
  std::vector<std::int64_t> offsets;
  std::int64_t total = 0;
  explicit DeviceParams(const ParamList& params) {
    for (const ParamInfo& p : params) {
      offsets.push_back(total);
      total += (p.numel() + 63) / 64 * 64;  // 256-byte aligned views
    }
    values.reserve(static_cast<std::size_t>(total) * sizeof(float));
    grads.reserve(static_cast<std::size_t>(total) * sizeof(float));
    zero_grads();
  }
  void zero_grads() {
    const std::vector<float> zeros(static_cast<std::size_t>(total), 0.0f);
    copy_to_device(grads.data(), zeros.data(), zeros.size() * sizeof(float));
  }
  std::vector<float*> views(const DeviceBuffer& b) const {
    std::vector<float*> out;
    for (std::int64_t o : offsets) out.push_back(b.as<float>() + o);
    return out;
  }
  std::vector<float> read(const DeviceBuffer& b, std::size_t i, std::int64_t numel) const {
    std::vector<float> out(static_cast<std::size_t>(numel));
    copy_to_host(out.data(), b.as<float>() + offsets[i], out.size() * sizeof(float));
    return out;
  }
  void write(const DeviceBuffer& b, std::size_t i, const std::vector<float>& v) const {
    copy_to_device(b.as<float>() + offsets[i], v.data(), v.size() * sizeof(float));
  }
};

double norm(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += static_cast<double>(x) * x;
  return std::sqrt(s);
}

double distance(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double d = static_cast<double>(a[i]) - b[i];
    s += d * d;
  }
  return std::sqrt(s);
}

// The tolerance of the header comment for `precision` on `c` with n rows.
double gradient_tolerance(const GptConfig& c, GemmPrecision precision, std::int64_t n) {
  const double chain = 2.0 * (6 * c.num_layers + 1);  // products on the longest chain
  if (precision == GemmPrecision::kBf16) return 2 * chain * std::ldexp(1.0, -8);
  if (precision == GemmPrecision::kTf32) return 2 * chain * std::ldexp(1.0, -10);
  const double k = std::max<double>(
      {static_cast<double>(n), static_cast<double>(c.vocab_size), static_cast<double>(c.ffn_hidden),
       static_cast<double>(c.hidden), static_cast<double>(c.seq_len)});
  return 2.0 * (6 * c.num_layers + 2) * k * std::ldexp(1.0, -24);
}

// ||a - b|| <= tol (||b|| + floor) for each parameter, floor = the RMS of `reference` over all
// parameters times sqrt(numel).
void expect_close_per_param(const ParamList& params, const std::vector<std::vector<float>>& actual,
                            const std::vector<std::vector<float>>& reference, double tol,
                            const char* what) {
  double sum_sq = 0, count = 0;
  for (const auto& r : reference) {
    const double nr = norm(r);
    sum_sq += nr * nr;
    count += static_cast<double>(r.size());
  }
  const double rms = std::sqrt(sum_sq / count);
  for (std::size_t i = 0; i < params.size(); ++i) {
    const double floor = rms * std::sqrt(static_cast<double>(reference[i].size()));
    const double err = distance(actual[i], reference[i]);
    EXPECT_LE(err, tol * (norm(reference[i]) + floor))
        << what << " of " << params[i].name << ": |diff| " << err << ", |reference| "
        << norm(reference[i]) << ", floor " << floor << ", tol " << tol;
  }
}

struct CpuRun {
  double loss = 0;
  std::vector<std::vector<float>> grads;
  std::vector<ParamId> ready_order;
  std::vector<bool> exact;
};

CpuRun run_cpu(const GptConfig& c, const Batch& b, double loss_scale, std::uint64_t seed) {
  GptModel<float> model(c);
  HostParams host(model.params());
  model.bind(host.pointers(host.values), host.pointers(host.grads));
  model.init_parameters(seed);
  CpuRun r;
  r.loss = model.forward(b.tokens.data(), b.targets.data(), b.batch, b.seq);
  r.exact = model.exact_match();
  model.backward(loss_scale, [&](ParamId id) { r.ready_order.push_back(id); });
  r.grads = host.grads;
  return r;
}

CpuRun run_device(const GptConfig& c, const Batch& b, double loss_scale, std::uint64_t seed,
                  GemmPrecision precision) {
  GptCudaOptions options;
  options.precision = precision;
  GptModelCuda model(c, options);
  DeviceParams dev(model.params());
  model.bind(dev.views(dev.values), dev.views(dev.grads));
  model.init_parameters(seed);
  CpuRun r;
  r.loss = model.forward(b.tokens.data(), b.targets.data(), b.batch, b.seq);
  r.exact = model.exact_match();
  model.backward(loss_scale, [&](ParamId id) { r.ready_order.push_back(id); });
  synchronize();
  for (std::size_t i = 0; i < model.params().size(); ++i) {
    r.grads.push_back(dev.read(dev.grads, i, model.params()[i].numel()));
  }
  return r;
}

struct Case {
  bool rope, tied;
  GemmPrecision precision;
};

class GptModelCudaMatchesCpu : public ::testing::TestWithParam<Case> {};

TEST_P(GptModelCudaMatchesCpu, LossGradientsAndReadyOrder) {
  SW_SKIP_WITHOUT_GPU();
  const Case k = GetParam();
  const GptConfig c = small_config(k.rope, k.tied);
  const Batch b = random_batch(c, 11);
  const double loss_scale = 2.0;  // checks the scale reaches every gradient
  const CpuRun cpu = run_cpu(c, b, loss_scale, 5);
  const CpuRun dev = run_device(c, b, loss_scale, 5, k.precision);
  const double tol = gradient_tolerance(c, k.precision, std::int64_t{b.batch} * b.seq);
  EXPECT_NEAR(dev.loss, cpu.loss, tol * cpu.loss);
  EXPECT_EQ(dev.ready_order, cpu.ready_order);
  expect_close_per_param(gpt_param_list(c), dev.grads, cpu.grads, tol, "gradient");
}

INSTANTIATE_TEST_SUITE_P(Configs, GptModelCudaMatchesCpu,
                         ::testing::Values(Case{false, true, GemmPrecision::kFp32},
                                           Case{true, true, GemmPrecision::kFp32},
                                           Case{false, false, GemmPrecision::kFp32},
                                           Case{true, false, GemmPrecision::kFp32},
                                           Case{false, true, GemmPrecision::kTf32},
                                           Case{true, false, GemmPrecision::kTf32},
                                           Case{false, true, GemmPrecision::kBf16},
                                           Case{true, false, GemmPrecision::kBf16}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return std::string(info.param.rope ? "rope" : "learned") +
                                  (info.param.tied ? "_tied_" : "_untied_") +
                                  to_string(info.param.precision);
                         });

TEST(GptModelCuda, GradientsAccumulateOverBackwards) {
  SW_SKIP_WITHOUT_GPU();
  const GptConfig c = small_config(true, true);
  const Batch b = random_batch(c, 3);
  GptModelCuda model(c);
  DeviceParams dev(model.params());
  model.bind(dev.views(dev.values), dev.views(dev.grads));
  model.init_parameters(9);
  model.forward(b.tokens.data(), b.targets.data(), b.batch, b.seq);
  model.backward(1.0, nullptr);
  std::vector<std::vector<float>> once, twice;
  for (std::size_t i = 0; i < model.params().size(); ++i) {
    once.push_back(dev.read(dev.grads, i, model.params()[i].numel()));
  }
  model.forward(b.tokens.data(), b.targets.data(), b.batch, b.seq);
  model.backward(1.0, nullptr);
  for (std::size_t i = 0; i < model.params().size(); ++i) {
    twice.push_back(dev.read(dev.grads, i, model.params()[i].numel()));
    for (float& x : once[i]) x *= 2.0f;
  }
  expect_close_per_param(model.params(), twice, once,
                         gradient_tolerance(c, GemmPrecision::kFp32, 16), "accumulated gradient");
}

TEST(GptModelCuda, InitialValuesEqualTheCpuModel) {
  SW_SKIP_WITHOUT_GPU();
  for (bool rope : {false, true}) {
    const GptConfig c = small_config(rope, false);
    GptModel<float> cpu(c);
    HostParams host(cpu.params());
    cpu.bind(host.pointers(host.values), host.pointers(host.grads));
    cpu.init_parameters(21);
    GptModelCuda model(c);
    DeviceParams dev(model.params());
    model.bind(dev.views(dev.values), dev.views(dev.grads));
    model.init_parameters(21);
    ASSERT_EQ(model.params().size(), cpu.params().size());
    for (std::size_t i = 0; i < model.params().size(); ++i) {
      EXPECT_EQ(model.params()[i].name, cpu.params()[i].name);
      EXPECT_EQ(model.params()[i].shape, cpu.params()[i].shape);
      EXPECT_EQ(test::first_bit_difference(dev.read(dev.values, i, model.params()[i].numel()),
                                           host.values[i]),
                "")
          << model.params()[i].name;
    }
  }
}

// Targets of sequence 0 are the CPU model's clear argmax predictions (positions whose top two
// probabilities are within 1e-3 relative are ignored, so rounding cannot flip them); sequence 1
// keeps random targets. Both models must agree, and sequence 0 must match.
TEST(GptModelCuda, ExactMatchAgreesWithCpu) {
  SW_SKIP_WITHOUT_GPU();
  const GptConfig c = small_config(false, true);
  Batch b = random_batch(c, 17);
  {
    GptModel<float> cpu(c);
    HostParams host(cpu.params());
    cpu.bind(host.pointers(host.values), host.pointers(host.grads));
    cpu.init_parameters(4);
    cpu.forward(b.tokens.data(), b.targets.data(), b.batch, b.seq);
    int counted = 0;
    for (int t = 0; t < b.seq; ++t) {
      const auto p = cpu.probabilities(0, t);
      std::vector<float> sorted(p.begin(), p.end());
      std::sort(sorted.rbegin(), sorted.rend());
      const auto best = static_cast<std::int32_t>(std::max_element(p.begin(), p.end()) - p.begin());
      const bool clear = sorted[0] - sorted[1] > 1e-3f * sorted[0];
      b.targets[static_cast<std::size_t>(t)] = clear ? best : -1;
      counted += clear ? 1 : 0;
    }
    ASSERT_GT(counted, 0);
  }
  const CpuRun cpu = run_cpu(c, b, 1.0, 4);
  const CpuRun dev = run_device(c, b, 1.0, 4, GemmPrecision::kFp32);
  EXPECT_TRUE(cpu.exact[0]);
  EXPECT_EQ(dev.exact, cpu.exact);
}

// Three steps of params -= lr * grad from the same start: the device model (its gradients
// applied to its own device params) stays within the gradient tolerance, per step, of the CPU
// model, measured against how far the params moved.
TEST(GptModelCuda, SgdStepsStayClose) {
  SW_SKIP_WITHOUT_GPU();
  const GptConfig c = small_config(true, true);
  const float lr = 0.5f;
  const int steps = 3;
  GptModel<float> cpu(c);
  HostParams host(cpu.params());
  cpu.bind(host.pointers(host.values), host.pointers(host.grads));
  cpu.init_parameters(8);
  GptModelCuda model(c);
  DeviceParams dev(model.params());
  model.bind(dev.views(dev.values), dev.views(dev.grads));
  model.init_parameters(8);
  const std::vector<std::vector<float>> start = host.values;
  const std::size_t count = model.params().size();
  const double tol = gradient_tolerance(c, GemmPrecision::kFp32, 16);
  for (int step = 0; step < steps; ++step) {
    const Batch b = random_batch(c, 100 + step);
    for (auto& g : host.grads) std::fill(g.begin(), g.end(), 0.0f);
    dev.zero_grads();
    const double cpu_loss = cpu.forward(b.tokens.data(), b.targets.data(), b.batch, b.seq);
    const double dev_loss = model.forward(b.tokens.data(), b.targets.data(), b.batch, b.seq);
    EXPECT_NEAR(dev_loss, cpu_loss, (step + 1) * tol * cpu_loss) << "step " << step;
    cpu.backward(1.0, nullptr);
    model.backward(1.0, nullptr);
    synchronize();
    for (std::size_t i = 0; i < count; ++i) {
      const std::int64_t numel = model.params()[i].numel();
      std::vector<float> p = dev.read(dev.values, i, numel);
      const std::vector<float> g = dev.read(dev.grads, i, numel);
      for (std::size_t e = 0; e < p.size(); ++e) {
        p[e] -= lr * g[e];
        host.values[i][e] -= lr * host.grads[i][e];
      }
      dev.write(dev.values, i, p);
    }
  }
  std::vector<std::vector<float>> moved_cpu(count), dev_values(count);
  for (std::size_t i = 0; i < count; ++i) {
    dev_values[i] = dev.read(dev.values, i, model.params()[i].numel());
    moved_cpu[i] = host.values[i];
    for (std::size_t e = 0; e < moved_cpu[i].size(); ++e) {
      moved_cpu[i][e] -= start[i][e];
      dev_values[i][e] -= start[i][e];
    }
  }
  // Compare the moves (params minus start): their difference is what the steps got wrong.
  expect_close_per_param(model.params(), dev_values, moved_cpu, steps * tol, "SGD move");
}

TEST(GptModelCuda, RefusesBadInput) {
  SW_SKIP_WITHOUT_GPU();
  const GptConfig c = small_config(false, true);
  GptModelCuda model(c);
  const Batch b = random_batch(c, 1);
  EXPECT_THROW(model.forward(b.tokens.data(), b.targets.data(), b.batch, b.seq), InvalidArgument);
  std::vector<std::vector<float>> host(model.params().size(), std::vector<float>(4));
  std::vector<float*> host_ptrs;
  for (auto& h : host) host_ptrs.push_back(h.data());
  EXPECT_THROW(model.bind(host_ptrs, host_ptrs), InvalidArgument);  // host memory
  DeviceParams dev(model.params());
  model.bind(dev.views(dev.values), dev.views(dev.grads));
  model.init_parameters(1);
  EXPECT_THROW(model.backward(1.0, nullptr), InvalidArgument);  // no forward yet
  Batch bad = b;
  bad.tokens[3] = c.vocab_size;
  EXPECT_THROW(model.forward(bad.tokens.data(), bad.targets.data(), bad.batch, bad.seq),
               ShapeError);
  EXPECT_THROW(model.forward(b.tokens.data(), b.targets.data(), 1, c.seq_len + 1), ShapeError);
}

// Host logic: no GPU needed.
TEST(GptModelCudaHost, RefusesTensorParallelismBeforeTouchingTheDevice) {
  GptCudaOptions options;
  options.tensor_parallel_size = 2;
  try {
    GptModelCuda model(small_config(false, true), options);
    FAIL() << "tensor_parallel_size 2 was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("tensor_parallel_size 2"), std::string::npos) << e.what();
  }
}

TEST(GptModelCudaHost, RefusesAnImpossibleConfig) {
  GptConfig c = small_config(false, true);
  c.num_heads = 5;  // 32 is not divisible by 5
  EXPECT_THROW(GptModelCuda{c}, InvalidArgument);
}

TEST(GptModelCudaHost, GemmPrecisionNames) {
  for (GemmPrecision p : {GemmPrecision::kFp32, GemmPrecision::kTf32, GemmPrecision::kBf16}) {
    EXPECT_EQ(parse_gemm_precision(to_string(p)), p);
  }
  EXPECT_THROW(parse_gemm_precision("fp16"), InvalidArgument);
}

// Megatron-LM's count for ffn = 4h: 72 B s L h^2 (1 + s / 6h + V / 12 L h) per B s tokens.
TEST(GptModelCudaHost, ModelFlopsMatchMegatronsFormula) {
  GptConfig c;
  c.vocab_size = 50304;
  c.seq_len = 1024;
  c.num_layers = 12;
  c.hidden = 768;
  c.num_heads = 12;
  c.ffn_hidden = 4 * 768;
  const double s = 1024, l = 12, h = 768, v = 50304;
  const double megatron = 72 * s * l * h * h * (1 + s / (6 * h) + v / (12 * l * h)) / s;
  EXPECT_NEAR(gpt_model_flops_per_token(c, 1024), megatron, 1e-9 * megatron);
}

}  // namespace
}  // namespace shardwise::cuda
