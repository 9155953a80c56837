#include "shardwise/layout/model_zoo.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>

#include "sanitizer_budget.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise {
namespace {

std::int64_t count_if_name(const ParamList& params, const std::string& fragment) {
  std::int64_t n = 0;
  for (const auto& p : params) n += p.name.find(fragment) != std::string::npos ? 1 : 0;
  return n;
}

const ParamInfo& by_name(const ParamList& params, const std::string& name) {
  for (const auto& p : params) {
    if (p.name == name) return p;
  }
  throw InvalidArgument("no param " + name);
}

// Published totals. Llama 3 and Mixtral match the Hugging Face checkpoints to the element, since
// the architectures are reproduced exactly; GPT-3's 175B is a rounded paper figure and our
// DeepSeek-V3 omits the multi-token-prediction module (671B of the released 685B).
TEST(ModelZoo, ParamCountsMatchKnownTotals) {
  EXPECT_EQ(bundled_model_spec("llama3-8b").total_numel(), 8'030'261'248);
  EXPECT_EQ(bundled_model_spec("llama3-70b").total_numel(), 70'553'706'496);
  EXPECT_EQ(bundled_model_spec("llama3-405b").total_numel(), 405'853'388'800);
  EXPECT_EQ(bundled_model_spec("mixtral-8x7b").total_numel(), 46'702'792'704);
  EXPECT_EQ(bundled_model_spec("gpt-small").total_numel(), 124'439'808);  // GPT-2 small
  const double gpt3 = static_cast<double>(bundled_model_spec("gpt3-175b").total_numel());
  EXPECT_NEAR(gpt3 / 175e9, 1.0, 0.005);  // within 0.5% of 175B
  const double deepseek = static_cast<double>(bundled_model_spec("deepseek-v3").total_numel());
  EXPECT_NEAR(deepseek / 671e9, 1.0, 0.005);  // within 0.5% of 671B
}

TEST(ModelZoo, NamesMatchIgnoringCaseAndUnknownNamesListThePresets) {
  EXPECT_TRUE(is_bundled_model("llama3-8B"));
  EXPECT_TRUE(is_bundled_model("DeepSeek-V3"));
  EXPECT_EQ(bundled_model_spec("LLAMA3-8B").total_numel(), 8'030'261'248);
  EXPECT_FALSE(is_bundled_model("llama3-9b-extra"));
  try {
    bundled_model_config("lama3-8b");
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("unknown model 'lama3-8b' (did you mean llama3-8b?)"), std::string::npos)
        << message;
    for (const auto& name : bundled_model_names()) {
      EXPECT_NE(message.find(name), std::string::npos) << name;
    }
  }
}

TEST(ModelZoo, EveryPresetIsValidAndUniquelyNamed) {
  SW_SKIP_UNDER_SANITIZERS();
  for (const auto& name : bundled_model_names()) {
    SCOPED_TRACE(name);
    EXPECT_TRUE(is_bundled_model(name));
    const ModelSpec spec = bundled_model_spec(name);
    EXPECT_EQ(spec.name, name);
    std::set<std::string> names;
    for (const auto& p : spec.params) {
      EXPECT_TRUE(names.insert(p.name).second) << p.name;
      EXPECT_GT(p.numel(), 0) << p.name;
      if (p.is_qkv()) {
        ASSERT_TRUE(p.is_2d());
        EXPECT_EQ(p.qkv_split[0] + p.qkv_split[1] + p.qkv_split[2], p.shape[0]);
      }
    }
    // Round trip through the JSON format keeps every param.
    const ModelSpec back = parse_model_spec(model_spec_to_json(spec), name);
    EXPECT_EQ(back.params.size(), spec.params.size());
    EXPECT_EQ(back.total_numel(), spec.total_numel());
  }
  EXPECT_FALSE(is_bundled_model("llama4"));
  EXPECT_THROW(bundled_model_config("llama4"), InvalidArgument);
}

TEST(ModelZoo, Llama8bStructure) {
  const ParamList params = bundled_model_spec("llama3-8b").params;
  ASSERT_EQ(params.size(), 2u + 32u * 6u + 1u);
  EXPECT_EQ(params.front().name, "embedding.word_embeddings.weight");
  EXPECT_TRUE(params.front().embedding_or_output);
  EXPECT_FALSE(params.front().shared_embedding);  // untied
  EXPECT_EQ(params.back().name, "output.weight");
  EXPECT_TRUE(params.back().embedding_or_output);
  const ParamInfo& qkv = by_name(params, "layers.3.attn.qkv.weight");
  EXPECT_EQ(qkv.shape, (std::vector<std::int64_t>{4096 + 2 * 1024, 4096}));
  EXPECT_EQ(qkv.qkv_split, (std::vector<std::int64_t>{4096, 1024, 1024}));
  EXPECT_EQ(by_name(params, "layers.3.mlp.fc1.weight").shape,
            (std::vector<std::int64_t>{2 * 14336, 4096}));
  EXPECT_EQ(by_name(params, "layers.3.mlp.fc2.weight").shape,
            (std::vector<std::int64_t>{4096, 14336}));
  EXPECT_EQ(by_name(params, "layers.31.input_norm.weight").shape,
            (std::vector<std::int64_t>{4096}));
  EXPECT_EQ(by_name(params, "layers.0.post_attn_norm.weight").shape,
            (std::vector<std::int64_t>{4096}));
  EXPECT_EQ(by_name(params, "final_norm.weight").shape, (std::vector<std::int64_t>{4096}));
  // Forward order: layer 0 params come before layer 1's.
  EXPECT_EQ(params[1].name, "layers.0.input_norm.weight");
  EXPECT_EQ(params[7].name, "layers.1.input_norm.weight");
  for (const auto& p : params) EXPECT_FALSE(p.expert_parallel);
}

TEST(ModelZoo, Gpt3IsTiedWithBiasesAndPositions) {
  const ParamList params = bundled_model_spec("gpt3-175b").params;
  const ParamInfo& embedding = params.front();
  EXPECT_TRUE(embedding.shared_embedding);
  EXPECT_TRUE(embedding.embedding_or_output);
  EXPECT_EQ(count_if_name(params, "output.weight"), 0);
  EXPECT_EQ(by_name(params, "embedding.position_embeddings.weight").shape,
            (std::vector<std::int64_t>{2048, 12288}));
  EXPECT_EQ(by_name(params, "layers.95.attn.qkv.bias").shape,
            (std::vector<std::int64_t>{3 * 12288}));
  EXPECT_EQ(by_name(params, "layers.0.mlp.fc1.weight").shape,
            (std::vector<std::int64_t>{4 * 12288, 12288}));  // GELU MLP, not gated
  EXPECT_EQ(by_name(params, "layers.0.input_norm.bias").shape, (std::vector<std::int64_t>{12288}));
}

TEST(ModelZoo, DeepSeekV3Structure) {
  const ParamList params = bundled_model_spec("deepseek-v3").params;
  // 58 MoE layers x 256 experts x (fc1, fc2) expert weights, all expert-parallel.
  std::int64_t expert = 0;
  for (const auto& p : params) {
    if (p.expert_parallel) {
      ++expert;
      EXPECT_NE(p.name.find(".experts."), std::string::npos) << p.name;
    }
  }
  EXPECT_EQ(expert, 58 * 256 * 2);
  EXPECT_EQ(count_if_name(params, ".router.weight"), 58);
  EXPECT_EQ(count_if_name(params, ".shared_experts.fc1.weight"), 58);
  // First 3 layers dense with the 18432-wide MLP.
  EXPECT_EQ(by_name(params, "layers.2.mlp.fc1.weight").shape,
            (std::vector<std::int64_t>{2 * 18432, 7168}));
  EXPECT_EQ(count_if_name(params, "layers.3.mlp.fc1.weight"), 0);
  const ParamInfo& router = by_name(params, "layers.3.mlp.router.weight");
  EXPECT_EQ(router.shape, (std::vector<std::int64_t>{256, 7168}));
  EXPECT_EQ(router.use_muon, false);
  EXPECT_FALSE(router.expert_parallel);
  EXPECT_EQ(by_name(params, "layers.60.mlp.experts.255.fc1.weight").shape,
            (std::vector<std::int64_t>{2 * 2048, 7168}));
  EXPECT_EQ(by_name(params, "layers.60.mlp.shared_experts.fc2.weight").shape,
            (std::vector<std::int64_t>{7168, 2048}));
  EXPECT_FALSE(by_name(params, "layers.60.mlp.shared_experts.fc2.weight").expert_parallel);
  // MLA as plain matrices.
  EXPECT_EQ(by_name(params, "layers.0.attn.q_up.weight").shape,
            (std::vector<std::int64_t>{128 * 192, 1536}));
  EXPECT_EQ(by_name(params, "layers.0.attn.kv_down.weight").shape,
            (std::vector<std::int64_t>{576, 7168}));
  EXPECT_EQ(by_name(params, "layers.0.attn.kv_up.weight").shape,
            (std::vector<std::int64_t>{128 * 256, 512}));
  EXPECT_EQ(by_name(params, "layers.0.attn.proj.weight").shape,
            (std::vector<std::int64_t>{7168, 128 * 128}));
  EXPECT_EQ(by_name(params, "output.weight").shape, (std::vector<std::int64_t>{129280, 7168}));
}

TEST(ModelZoo, MixtralExpertsAreExpertParallel) {
  const ParamList params = bundled_model_spec("mixtral-8x7b").params;
  std::int64_t expert_numel = 0;
  for (const auto& p : params) {
    if (p.expert_parallel) expert_numel += p.numel();
  }
  EXPECT_EQ(expert_numel, 32LL * 8 * 3 * 4096 * 14336);
  EXPECT_EQ(count_if_name(params, "shared_experts"), 0);
}

TEST(ModelZoo, OverridesAndValidation) {
  TransformerConfig c = bundled_model_config("gpt-tiny");
  c.num_layers = 5;
  c.tied_embeddings = false;
  const ParamList params = generate_transformer_params(c);
  EXPECT_EQ(count_if_name(params, ".attn.qkv.weight"), 5);
  EXPECT_EQ(count_if_name(params, "output.weight"), 1);

  TransformerConfig bad = bundled_model_config("llama3-8b");
  bad.num_query_groups = 5;  // 32 heads are not a multiple of 5 groups
  EXPECT_THROW(generate_transformer_params(bad), InvalidArgument);
  bad = bundled_model_config("llama3-8b");
  bad.num_layers = 0;
  EXPECT_THROW(generate_transformer_params(bad), InvalidArgument);
  bad = bundled_model_config("moe-tiny");
  bad.moe_ffn_hidden_size = 0;
  EXPECT_THROW(generate_transformer_params(bad), InvalidArgument);
  bad = bundled_model_config("moe-tiny");
  bad.num_dense_layers = 9;
  EXPECT_THROW(generate_transformer_params(bad), InvalidArgument);
}

// The bundled example specs are generated by `shardwise model-spec`; they must stay in sync with
// the generator.
TEST(ModelZoo, BundledExampleFilesMatchTheGenerator) {
  const auto dir =
      std::filesystem::path(__FILE__).parent_path() / ".." / ".." / "examples" / "models";
  if (!std::filesystem::exists(dir)) GTEST_SKIP() << "no " << dir;
  int checked = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".json") continue;
    SCOPED_TRACE(entry.path().string());
    const ModelSpec file = load_model_spec(entry.path());
    ASSERT_TRUE(is_bundled_model(file.name));
    EXPECT_EQ(model_spec_to_json(file), model_spec_to_json(bundled_model_spec(file.name)));
    ++checked;
  }
  EXPECT_GE(checked, 5);
}

}  // namespace
}  // namespace shardwise
