// Backward of the reference GPT against central finite differences, in double precision.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

#include "shardwise/core/error.hpp"
#include "shardwise/model/gpt_model.hpp"

namespace shardwise {
namespace {

struct OwnedParams {
  std::vector<std::vector<double>> values, grads;
  explicit OwnedParams(const ParamList& params) {
    for (const auto& p : params) {
      values.emplace_back(p.numel());
      grads.emplace_back(p.numel(), 0.0);
    }
  }
  std::vector<double*> value_ptrs() {
    std::vector<double*> out;
    for (auto& v : values) out.push_back(v.data());
    return out;
  }
  std::vector<double*> grad_ptrs() {
    std::vector<double*> out;
    for (auto& g : grads) out.push_back(g.data());
    return out;
  }
};

GptConfig tiny_config(bool rope, bool tied) {
  GptConfig c;
  c.vocab_size = 7;
  c.seq_len = 5;
  c.num_layers = 2;
  c.hidden = 8;
  c.num_heads = 2;
  c.ffn_hidden = 12;
  c.rope = rope;
  c.tied_embeddings = tied;
  c.init_std = 0.5;  // large enough that every path carries signal
  return c;
}

class GptGradientCheck : public testing::TestWithParam<std::tuple<bool, bool>> {};

TEST_P(GptGradientCheck, BackwardMatchesFiniteDifferences) {
  const auto [rope, tied] = GetParam();
  GptModel<double> model(tiny_config(rope, tied));
  OwnedParams storage(model.params());
  model.bind(storage.value_ptrs(), storage.grad_ptrs());
  model.init_parameters(1234);
  // Perturb biases and norm weights too, so their gradients are generic.
  std::mt19937_64 rng(7);
  std::normal_distribution<double> noise(0.0, 0.3);
  for (auto& v : storage.values) {
    for (auto& x : v) x += noise(rng);
  }

  const int batch = 2, seq = 5;
  std::vector<std::int32_t> tokens = {1, 3, 5, 2, 0, 6, 4, 4, 1, 2};
  std::vector<std::int32_t> targets = {3, 5, -1, 0, 6, 4, 4, 1, -1, 2};
  model.forward(tokens.data(), targets.data(), batch, seq);

  // Record each gradient at the moment it is reported ready: it must already be final.
  std::map<ParamId, std::vector<double>> at_ready;
  std::vector<ParamId> order;
  model.backward(1.0, [&](ParamId id) {
    order.push_back(id);
    at_ready[id] = storage.grads[id];
  });
  ASSERT_EQ(order.size(), model.params().size());
  for (std::size_t i = 0; i < order.size(); ++i) {
    EXPECT_EQ(at_ready[order[i]], storage.grads[order[i]])
        << model.params()[order[i]].name << " changed after it was reported ready";
  }
  EXPECT_EQ(order.back(), 0u) << "the word embedding is the last gradient to become final";

  const double eps = 1e-6;
  std::mt19937_64 pick(99);
  for (ParamId id = 0; id < model.params().size(); ++id) {
    auto& value = storage.values[id];
    for (int trial = 0; trial < 4; ++trial) {
      const std::size_t e = pick() % value.size();
      const double saved = value[e];
      value[e] = saved + eps;
      const double up = model.forward(tokens.data(), targets.data(), batch, seq);
      value[e] = saved - eps;
      const double down = model.forward(tokens.data(), targets.data(), batch, seq);
      value[e] = saved;
      const double numeric = (up - down) / (2 * eps);
      const double analytic = storage.grads[id][e];
      EXPECT_NEAR(analytic, numeric, 1e-7 + 1e-5 * std::fabs(numeric))
          << model.params()[id].name << "[" << e << "]";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(PositionAndTying, GptGradientCheck,
                         testing::Combine(testing::Bool(), testing::Bool()));

TEST(GptModel, GradientsAccumulateAcrossBackwardCalls) {
  GptModel<double> model(tiny_config(false, true));
  OwnedParams storage(model.params());
  model.bind(storage.value_ptrs(), storage.grad_ptrs());
  model.init_parameters(5);
  std::vector<std::int32_t> tokens = {1, 2, 3, 4, 5}, targets = {2, 3, 4, 5, 6};
  model.forward(tokens.data(), targets.data(), 1, 5);
  model.backward(1.0, nullptr);
  const auto once = storage.grads;
  model.forward(tokens.data(), targets.data(), 1, 5);
  model.backward(0.5, nullptr);
  for (std::size_t p = 0; p < once.size(); ++p) {
    for (std::size_t i = 0; i < once[p].size(); ++i) {
      EXPECT_NEAR(storage.grads[p][i], 1.5 * once[p][i], 1e-12 + 1e-12 * std::fabs(once[p][i]));
    }
  }
}

TEST(GptModel, ParamsDeclareRoutingFlags) {
  GptModel<float> model(tiny_config(false, true));
  const auto& params = model.params();
  EXPECT_TRUE(params[0].shared_embedding);
  EXPECT_TRUE(params[0].embedding_or_output);
  bool saw_qkv = false;
  for (const auto& p : params) {
    if (p.name.ends_with("attention.qkv.weight")) {
      saw_qkv = true;
      EXPECT_EQ(p.qkv_split, (std::vector<std::int64_t>{8, 8, 8}));
      EXPECT_TRUE(is_managed_by_layer_wise_optimizer(p));
    }
    if (p.name.ends_with(".bias")) {
      EXPECT_FALSE(is_managed_by_layer_wise_optimizer(p));
    }
  }
  EXPECT_TRUE(saw_qkv);
}

TEST(GptModel, InvalidConfigNamesTheField) {
  GptConfig c = tiny_config(false, true);
  c.num_heads = 3;
  try {
    GptModel<float> model(c);
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("num_heads"), std::string::npos);
  }
}

}  // namespace
}  // namespace shardwise
