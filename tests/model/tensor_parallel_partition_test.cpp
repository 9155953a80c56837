// Slicing full (tp = 1) parameters into TP shards and placing them back, the padded vocabulary,
// and the TP checks of GptConfig.
#include <gtest/gtest.h>

#include <numeric>

#include "shardwise/core/error.hpp"
#include "shardwise/model/gpt_model.hpp"

namespace shardwise {
namespace {

GptConfig small_config() {
  GptConfig c;
  c.vocab_size = 50;
  c.hidden = 16;
  c.num_heads = 4;
  c.ffn_hidden = 32;
  c.tied_embeddings = false;
  c.make_vocab_size_divisible_by = 4;
  return c;
}

std::size_t index_of(const ParamList& params, const std::string& name) {
  for (std::size_t i = 0; i < params.size(); ++i) {
    if (params[i].name == name) return i;
  }
  ADD_FAILURE() << "no parameter " << name;
  return 0;
}

std::vector<float> iota_values(std::int64_t count) {
  std::vector<float> v(static_cast<std::size_t>(count));
  std::iota(v.begin(), v.end(), 1.0f);  // no zeros: padding shows as 0
  return v;
}

TEST(TensorParallelPartition, SliceThenPlaceRoundTripsEveryParameter) {
  const GptConfig config = small_config();
  const ParamList full = gpt_param_list(config, 1);
  for (int tp : {2, 4}) {
    const ParamList shards = gpt_param_list(config, tp);
    ASSERT_EQ(shards.size(), full.size());
    for (std::size_t i = 0; i < full.size(); ++i) {
      const std::vector<float> value = iota_values(full[i].numel());
      std::vector<float> back(value.size(), -1.0f);
      std::int64_t real_elements = 0;
      for (int r = 0; r < tp; ++r) {
        std::vector<float> shard(static_cast<std::size_t>(shards[i].numel()));
        slice_tp_shard(full[i], shards[i], tp, r, value.data(), shard.data());
        real_elements += std::count_if(shard.begin(), shard.end(), [](float x) { return x != 0; });
        place_tp_shard(full[i], shards[i], tp, r, shard.data(), back.data());
      }
      EXPECT_EQ(back, value) << full[i].name << " tp=" << tp;
      // Partitioned params are covered exactly once; replicated ones once per rank.
      const std::int64_t copies = shards[i].is_tp_partitioned() ? 1 : tp;
      EXPECT_EQ(real_elements, copies * full[i].numel()) << full[i].name << " tp=" << tp;
    }
  }
}

// Rank r of a fused [q | k | v] weight holds q rows, then k rows, then v rows of its heads.
TEST(TensorParallelPartition, QkvShardTakesItsHeadsOfEachPart) {
  const GptConfig config = small_config();
  const std::size_t qkv = index_of(gpt_param_list(config, 1), "layers.0.attention.qkv.weight");
  const ParamInfo full = gpt_param_list(config, 1)[qkv];
  const ParamInfo shard = gpt_param_list(config, 2)[qkv];
  const std::int64_t h = config.hidden, part = h / 2;
  const std::vector<float> value = iota_values(full.numel());
  std::vector<float> got(static_cast<std::size_t>(shard.numel()));
  slice_tp_shard(full, shard, 2, 1, value.data(), got.data());
  for (std::int64_t p = 0; p < 3; ++p) {
    for (std::int64_t k = 0; k < part; ++k) {
      const std::int64_t full_row = p * h + part + k;  // part p, second half of its rows
      EXPECT_EQ(got[(p * part + k) * h], value[full_row * h]) << "part " << p << " row " << k;
    }
  }
}

TEST(TensorParallelPartition, RowParallelWeightSplitsColumnsAndVocabPadsWithZeros) {
  const GptConfig config = small_config();
  const ParamList full = gpt_param_list(config, 1), shards = gpt_param_list(config, 4);
  const std::size_t i = index_of(full, "layers.0.attention.proj.weight");
  const ParamInfo& proj = shards[i];
  EXPECT_EQ(proj.shape, (std::vector<std::int64_t>{16, 4}));
  const std::vector<float> value = iota_values(full[i].numel());
  std::vector<float> got(static_cast<std::size_t>(proj.numel()));
  slice_tp_shard(full[i], proj, 4, 2, value.data(), got.data());
  EXPECT_EQ(got[0], value[8]);            // row 0, column 8
  EXPECT_EQ(got[4 + 3], value[16 + 11]);  // row 1, column 11
  // Vocabulary 50 padded to 64 at tp = 4: rank 3 holds rows 48..63, two of them real.
  const ParamInfo& wte = shards[0];
  EXPECT_EQ(wte.shape, (std::vector<std::int64_t>{16, 16}));
  const std::vector<float> table = iota_values(full[0].numel());
  std::vector<float> last(static_cast<std::size_t>(wte.numel()));
  slice_tp_shard(full[0], wte, 4, 3, table.data(), last.data());
  EXPECT_EQ(last[0], table[48 * 16]);
  EXPECT_EQ(last[2 * 16 - 1], table[50 * 16 - 1]);
  EXPECT_TRUE(std::all_of(last.begin() + 2 * 16, last.end(), [](float x) { return x == 0; }));
}

TEST(TensorParallelPartition, MismatchedInfosAreShapeErrors) {
  const GptConfig config = small_config();
  const ParamList full = gpt_param_list(config, 1), shards = gpt_param_list(config, 2);
  const std::size_t qkv = index_of(full, "layers.0.attention.qkv.weight");
  const std::size_t fc1 = index_of(full, "layers.0.mlp.fc1.weight");
  std::vector<float> buffer(4096);
  // A tp = 2 shard sliced as if tp were 4 does not cover the full parameter.
  EXPECT_THROW(slice_tp_shard(full[qkv], shards[qkv], 4, 0, buffer.data(), buffer.data()),
               ShapeError);
  EXPECT_THROW(slice_tp_shard(full[qkv], shards[fc1], 2, 0, buffer.data(), buffer.data()),
               ShapeError);
  EXPECT_THROW(place_tp_shard(full[qkv], shards[qkv], 2, 2, buffer.data(), buffer.data()),
               InvalidArgument);
}

TEST(TensorParallelConfig, PaddedVocabularyFollowsMegatron) {
  GptConfig c;
  c.vocab_size = 50257;
  EXPECT_EQ(c.padded_vocab_size(1), 50257);
  EXPECT_EQ(c.padded_vocab_size(2), 50432);  // multiple of 256
  EXPECT_EQ(c.padded_vocab_size(8), 51200);  // multiple of 1024
  c.vocab_size = 256;
  EXPECT_EQ(c.padded_vocab_size(2), 256);
}

void expect_config_error(const GptConfig& c, int tp, const std::string& field) {
  try {
    c.validate_tensor_parallel(tp);
    ADD_FAILURE() << "no error for tp=" << tp << ", expected one naming " << field;
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
  }
}

TEST(TensorParallelConfig, RefusesSizesThatDoNotSplit) {
  GptConfig c = small_config();
  EXPECT_NO_THROW(c.validate_tensor_parallel(4));
  expect_config_error(c, 8, "model.num_heads");
  expect_config_error(c, 0, "parallel.tp");
  c.num_heads = 8;
  c.hidden = 32;
  c.ffn_hidden = 36;
  expect_config_error(c, 8, "model.ffn_hidden");
  EXPECT_NO_THROW(GptModel<float>(c, TensorParallelOptions{})) << "fine at tp=1";
}

}  // namespace
}  // namespace shardwise
