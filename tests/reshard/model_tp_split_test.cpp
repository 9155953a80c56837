// The reference GPT declares each parameter's tensor-parallel split in its own param list; refit
// and export fall back to Megatron's name rules for weights that come from a file. The two must
// agree on every parameter of the model, or a checkpoint exported by name would be split
// differently from the same weights refitted from training.
#include <gtest/gtest.h>

#include "shardwise/model/gpt_model.hpp"
#include "shardwise/reshard/refit.hpp"
#include "shardwise/reshard/tp_rules.hpp"

namespace shardwise {
namespace {

GptConfig model_with(bool tied, bool rope) {
  GptConfig config;
  config.vocab_size = 50;
  config.num_layers = 3;
  config.hidden = 32;
  config.num_heads = 4;
  config.ffn_hidden = 128;
  config.tied_embeddings = tied;
  config.rope = rope;
  return config;
}

TEST(ModelTpSplit, EveryDeclaredSplitIsTheMegatronRuleForItsName) {
  for (const bool tied : {true, false}) {
    for (const bool rope : {true, false}) {
      const ParamList params = gpt_param_list(model_with(tied, rope), 1);
      int split = 0;
      for (const ParamInfo& p : params) {
        ASSERT_TRUE(p.tp_split.has_value()) << p.name << " declares no split";
        const TpRule declared = tp_rule_from_split(p.name, p.tp_split->dim, p.tp_split->stride);
        EXPECT_EQ(declared, megatron_tp_rule(p.name, p.shape))
            << p.name << ": model declares " << to_string(declared) << ", name rule says "
            << to_string(megatron_tp_rule(p.name, p.shape));
        split += declared.kind != TpKind::kReplicated ? 1 : 0;
      }
      // qkv w+b, proj, fc1 w+b, fc2 per layer; the word embeddings; an untied output layer.
      EXPECT_EQ(split, 3 * 6 + 1 + (tied ? 0 : 1)) << "tied " << tied << " rope " << rope;
    }
  }
}

TEST(ModelTpSplit, TheDeclarationDoesNotDependOnTheTpSizeItIsBuiltFor) {
  const GptConfig config = model_with(false, false);
  const ParamList whole = gpt_param_list(config, 1);
  const ParamList halves = gpt_param_list(config, 2);
  ASSERT_EQ(whole.size(), halves.size());
  for (std::size_t i = 0; i < whole.size(); ++i) {
    EXPECT_EQ(whole[i].tp_split, halves[i].tp_split) << whole[i].name;
    // At tp 2 the active split is the declared one.
    EXPECT_EQ(halves[i].tp_partition_dim, halves[i].tp_split->dim) << halves[i].name;
  }
}

TEST(ModelTpSplit, OnlyMegatronSplitsAreAccepted) {
  EXPECT_EQ(tp_rule_from_split("w", -1, 1), TpRule{});
  EXPECT_EQ(tp_rule_from_split("w", 0, 3), (TpRule{TpKind::kColumnParallel, 0, 3}));
  EXPECT_EQ(tp_rule_from_split("w", 1, 1), (TpRule{TpKind::kRowParallel, 1, 1}));
  EXPECT_THROW(tp_rule_from_split("w", 2, 1), InvalidArgument);
  EXPECT_THROW(tp_rule_from_split("w", 0, 0), InvalidArgument);
}

TEST(ModelTpSplit, RefitTakesTheDeclaredSplitOverTheNameRule) {
  const TpRule column{TpKind::kColumnParallel, 0, 1};
  // "router.weight" is replicated by name; a model that declares it split is believed.
  EXPECT_EQ(refit_tp_rule({"router.weight", {8, 4}, column}), column);
  EXPECT_EQ(refit_tp_rule({"router.weight", {8, 4}}), TpRule{});
  EXPECT_EQ(refit_tp_rule({"layers.0.mlp.fc2.weight", {4, 8}}),
            (TpRule{TpKind::kRowParallel, 1, 1}));
}

}  // namespace
}  // namespace shardwise
