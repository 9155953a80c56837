// Tensor-parallel reference GPT against the tp = 1 model on the same batch: loss, every gradient
// (gathered back to full), exact match and probabilities, with and without sequence parallelism,
// at tp = 2 and tp = 4 (where the world allows), and the vocab-parallel cross-entropy against the
// full-vocabulary one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "shardwise/comm/mpi_process_group.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/model/dense_kernels.hpp"
#include "shardwise/model/gpt_model.hpp"
#include "shardwise/model/vocab_parallel.hpp"

namespace shardwise {
namespace {

struct OwnedParams {
  std::vector<std::vector<float>> values, grads;
  explicit OwnedParams(const ParamList& params) {
    for (const auto& p : params) {
      values.emplace_back(p.numel());
      grads.emplace_back(p.numel(), 0.0f);
    }
  }
  void bind(GptModel<float>& model) {
    std::vector<float*> v, g;
    for (auto& x : values) v.push_back(x.data());
    for (auto& x : grads) g.push_back(x.data());
    model.bind(v, g);
  }
};

struct Batch {
  std::vector<std::int32_t> tokens, targets;
  int batch = 0, seq = 0;
};

Batch random_batch(const GptConfig& c, int batch, int seq, std::uint32_t seed) {
  std::mt19937 rng(seed);  // the same on every rank: every TP rank sees the whole batch
  std::uniform_int_distribution<int> token(0, c.vocab_size - 1);
  Batch b{{}, {}, batch, seq};
  for (int i = 0; i < batch * seq; ++i) {
    b.tokens.push_back(token(rng));
    b.targets.push_back(i % 7 == 3 ? -1 : token(rng));  // some ignored targets
  }
  return b;
}

// max |got - want| <= rel * max |want| (plus a floor for all-zero tensors).
void expect_close(const std::vector<float>& got, const std::vector<float>& want, double rel,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double scale = 0, err = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    scale = std::max(scale, std::abs(static_cast<double>(want[i])));
    err = std::max(err, std::abs(static_cast<double>(got[i]) - want[i]));
  }
  EXPECT_LE(err, rel * scale + 1e-12) << what << ": max error " << err << " at scale " << scale;
}

GptConfig config_for(bool rope, bool tied, int vocab_multiple) {
  GptConfig c;
  c.vocab_size = 50;
  c.seq_len = 8;
  c.num_layers = 2;
  c.hidden = 32;
  c.num_heads = 4;
  c.ffn_hidden = 64;
  c.rope = rope;
  c.tied_embeddings = tied;
  c.init_std = 0.2;  // large enough weights that every layer's gradient matters
  c.make_vocab_size_divisible_by = vocab_multiple;
  return c;
}

// Runs two micro-batches (gradients accumulate) through the tp = 1 model and the TP model and
// compares losses, gathered gradients, exact match and probabilities.
void compare_with_tp1(const GptConfig& config, const ProcessGroupPtr& tp_group, bool sp) {
  const std::string where = std::string("tp=") + std::to_string(tp_group->size()) +
                            (sp ? " sp" : "") + (config.rope ? " rope" : "") +
                            (config.tied_embeddings ? " tied" : " untied");
  GptModel<float> ref(config);
  OwnedParams ref_p(ref.params());
  ref_p.bind(ref);
  ref.init_parameters(11);
  GptModel<float> tp(config, TensorParallelOptions{tp_group.get(), sp});
  OwnedParams tp_p(tp.params());
  tp_p.bind(tp);
  tp.init_parameters(11);
  ASSERT_EQ(tp.params().size(), ref.params().size());

  std::vector<int> ready_count(tp.params().size(), 0);
  for (std::uint32_t step = 0; step < 2; ++step) {
    const Batch b = random_batch(config, 2, 8, 100 + step);
    const double ref_loss = ref.forward(b.tokens.data(), b.targets.data(), b.batch, b.seq);
    const double tp_loss = tp.forward(b.tokens.data(), b.targets.data(), b.batch, b.seq);
    EXPECT_NEAR(tp_loss, ref_loss, 1e-5 * std::abs(ref_loss)) << where << " step " << step;
    EXPECT_EQ(tp.exact_match(), ref.exact_match()) << where;
    for (int t : {0, 5}) {
      const auto want = ref.probabilities(1, t);
      const auto got = tp.probabilities(1, t);
      expect_close({got.begin(), got.end()}, {want.begin(), want.end()}, 1e-5,
                   where + " probabilities");
    }
    ref.backward(0.5, nullptr);
    tp.backward(0.5, [&](ParamId id) { ++ready_count[id]; });
  }
  for (std::size_t i = 0; i < tp.params().size(); ++i) {
    const ParamInfo& full = ref.params()[i];
    const ParamInfo& shard = tp.params()[i];
    EXPECT_EQ(ready_count[i], 2) << where << " " << shard.name;
    std::vector<float> value(full.numel()), grad(full.numel());
    gather_tp_param(full, shard, *tp_group, tp_p.values[i].data(), value.data());
    gather_tp_param(full, shard, *tp_group, tp_p.grads[i].data(), grad.data());
    EXPECT_EQ(value, ref_p.values[i]) << where << " initial value of " << shard.name;
    expect_close(grad, ref_p.grads[i], 1e-5, where + " grad of " + shard.name);
  }
  // Padding rows of the vocabulary never receive a gradient.
  const ParamInfo& wte = tp.params()[0];
  const std::int64_t h = config.hidden, begin = wte.shape[0] * tp_group->rank();
  for (std::int64_t row = std::max<std::int64_t>(config.vocab_size - begin, 0); row < wte.shape[0];
       ++row) {
    for (std::int64_t c = 0; c < h; ++c) ASSERT_EQ(tp_p.grads[0][row * h + c], 0.0f) << where;
  }
}

// 20 steps of plain SGD on both models (each TP rank updates its own shard): the TP losses track
// the tp = 1 losses within 1e-5 relative, so rounding differences do not grow over training.
void train_side_by_side(const GptConfig& config, const ProcessGroupPtr& tp_group, bool sp) {
  GptModel<float> ref(config);
  OwnedParams ref_p(ref.params());
  ref_p.bind(ref);
  ref.init_parameters(5);
  GptModel<float> tp(config, TensorParallelOptions{tp_group.get(), sp});
  OwnedParams tp_p(tp.params());
  tp_p.bind(tp);
  tp.init_parameters(5);
  auto sgd = [](OwnedParams& p) {
    for (std::size_t i = 0; i < p.values.size(); ++i) {
      for (std::size_t j = 0; j < p.values[i].size(); ++j) {
        p.values[i][j] -= 0.1f * p.grads[i][j];
        p.grads[i][j] = 0.0f;
      }
    }
  };
  double first = 0, last = 0;
  for (std::uint32_t step = 0; step < 20; ++step) {
    const Batch b = random_batch(config, 2, 8, 7 + step % 3);  // three batches, revisited
    const double ref_loss = ref.forward(b.tokens.data(), b.targets.data(), b.batch, b.seq);
    const double tp_loss = tp.forward(b.tokens.data(), b.targets.data(), b.batch, b.seq);
    ASSERT_NEAR(tp_loss, ref_loss, 1e-5 * std::abs(ref_loss))
        << "tp=" << tp_group->size() << (sp ? " sp" : "") << " step " << step;
    ref.backward(1.0, nullptr);
    tp.backward(1.0, nullptr);
    sgd(ref_p);
    sgd(tp_p);
    (step == 0 ? first : last) = ref_loss;
  }
  EXPECT_LT(last, first) << "the runs should learn something";
}

class TensorParallelModel : public ::testing::Test {
 protected:
  // TP groups of `tp` consecutive ranks, or null when the world does not split that way.
  ProcessGroupPtr tp_group(int tp) {
    if (world->size() % tp != 0 || world->size() < tp) return nullptr;
    return make_parallel_groups(world, ParallelSizes{.tp = tp}).tensor_parallel;
  }
  ProcessGroupPtr world = init_mpi_world();
};

TEST_F(TensorParallelModel, MatchesTp1WithAndWithoutSequenceParallelism) {
  for (int tp : {2, 4}) {
    ProcessGroupPtr group = tp_group(tp);
    if (!group) continue;
    for (bool sp : {false, true}) {
      compare_with_tp1(config_for(/*rope=*/false, /*tied=*/true, 4), group, sp);
      compare_with_tp1(config_for(/*rope=*/true, /*tied=*/false, 4), group, sp);
    }
    // Megatron's default padding (128 x tp) leaves whole ranks with padding rows only.
    compare_with_tp1(config_for(false, true, 128), group, true);
  }
}

TEST_F(TensorParallelModel, TwentySgdStepsTrackTp1) {
  for (int tp : {2, 4}) {
    ProcessGroupPtr group = tp_group(tp);
    if (!group) continue;
    for (bool sp : {false, true}) train_side_by_side(config_for(true, false, 4), group, sp);
  }
}

TEST_F(TensorParallelModel, ParamsCarryTheirSplit) {
  ProcessGroupPtr group = tp_group(2);
  GptModel<float> model(config_for(false, true, 4), TensorParallelOptions{group.get(), true});
  for (const ParamInfo& p : model.params()) {
    const bool replicated = p.name.find("layernorm") != std::string::npos ||
                            p.name.ends_with("proj.bias") || p.name.ends_with("fc2.bias") ||
                            p.name.find("position") != std::string::npos;
    EXPECT_EQ(p.tp_duplicate, replicated) << p.name;
    EXPECT_EQ(p.is_tp_partitioned(), !replicated) << p.name;
  }
  EXPECT_EQ(model.params()[0].shape, (std::vector<std::int64_t>{28, 32}));  // 50 -> 56 rows / 2
  const ParamInfo& qkv = model.params()[4];
  EXPECT_EQ(qkv.name, "layers.0.attention.qkv.weight");
  EXPECT_EQ(qkv.tp_stride, 3);
  EXPECT_EQ(qkv.qkv_split, (std::vector<std::int64_t>{16, 16, 16}));
}

TEST_F(TensorParallelModel, SequenceParallelNeedsRowsDivisibleByTp) {
  ProcessGroupPtr group = tp_group(2);
  const GptConfig config = config_for(false, true, 4);
  GptModel<float> model(config, TensorParallelOptions{group.get(), true});
  OwnedParams p(model.params());
  p.bind(model);
  model.init_parameters(1);
  const Batch b = random_batch(config, 1, 7, 1);
  EXPECT_THROW(model.forward(b.tokens.data(), b.targets.data(), 1, 7), ShapeError);
}

TEST_F(TensorParallelModel, DoubleModelRefusesTp) {
  ProcessGroupPtr group = tp_group(2);
  EXPECT_THROW(GptModel<double>(config_for(false, true, 4), TensorParallelOptions{group.get()}),
               InvalidArgument);
}

// Random logits with garbage in the padding columns: the vocab-parallel loss and probabilities
// equal softmax_cross_entropy over the real vocabulary.
TEST_F(TensorParallelModel, VocabParallelCrossEntropyEqualsFullVocab) {
  for (int tp : {2, 4}) {
    ProcessGroupPtr group = tp_group(tp);
    if (!group) continue;
    const TensorParallelOptions opts{group.get(), false};
    const std::int64_t n = 6, vocab = 10, padded = 12, v_local = padded / tp;
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.0f, 3.0f);
    std::vector<float> full(n * vocab);
    for (float& x : full) x = normal(rng);
    const std::vector<std::int32_t> targets = {3, -1, 9, 0, 5, 9};
    std::vector<float> local(n * v_local);
    const std::int64_t begin = v_local * group->rank();
    for (std::int64_t i = 0; i < n; ++i) {
      for (std::int64_t c = 0; c < v_local; ++c) {
        const std::int64_t col = begin + c;
        local[i * v_local + c] = col < vocab ? full[i * vocab + col] : 1e4f;  // padding: huge
      }
    }
    std::int64_t want_counted = 0, got_counted = 0;
    const double want = softmax_cross_entropy(full, targets, n, vocab, want_counted);
    const double got =
        vocab_parallel_cross_entropy(opts, local, targets, n, v_local, vocab, got_counted);
    EXPECT_EQ(got_counted, want_counted);
    EXPECT_NEAR(got, want, 1e-6 * std::abs(want)) << "tp=" << tp;
    for (std::int64_t i = 0; i < n; ++i) {
      for (std::int64_t c = 0; c < v_local; ++c) {
        const std::int64_t col = begin + c;
        const float expected = col < vocab ? full[i * vocab + col] : 0.0f;
        EXPECT_NEAR(local[i * v_local + c], expected, 1e-6) << "row " << i << " col " << col;
      }
    }
  }
}

}  // namespace
}  // namespace shardwise
