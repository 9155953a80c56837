#include "shardwise/layout/layout_stats.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "shardwise/layout/layout_algorithms.hpp"
#include "shardwise/layout/layout_report.hpp"
#include "shardwise/layout/model_zoo.hpp"

namespace shardwise {
namespace {

ParamInfo make_param(std::string name, std::vector<std::int64_t> shape) {
  ParamInfo p;
  p.name = std::move(name);
  p.shape = std::move(shape);
  return p;
}

// A hand-built layout with dp = 2:
//   layer-wise buffer (shard-aligned, 2 shards)
//     bucket 0 [0, 128), shard size 64:   p0 [8,4]  at [0, 32)    -> shard 0
//                                         p1 [4,4]  at [64, 80)   -> shard 1
//     bucket 1 [128, 256), shard size 64: p3 [6,2]  at [128, 140) -> shard 0
//                                         p4 [10,4] at [192, 232) -> shard 1
//   element-sharded buffer (2 shards)
//     bucket 0 [0, 128):   p5 [100] at [0, 100)   -> rank 0 gets 64 elements, rank 1 gets 36
//     bucket 1 [128, 256): p2 [16]  at [128, 144) -> rank 0 gets 16, rank 1 none
// Newton–Schulz costs max(m,n)*min(m,n)^2: p0 128, p1 64, p3 24, p4 160; elementwise otherwise.
struct HandLayout {
  ParamList params = {make_param("p0", {8, 4}), make_param("p1", {4, 4}),  make_param("p2", {16}),
                      make_param("p3", {6, 2}), make_param("p4", {10, 4}), make_param("p5", {100})};
  FullParamLayout layout;
  LayoutOptions options;

  HandLayout() {
    options.data_parallel_size = 2;
    PerBufferParamLayout aligned;
    aligned.num_shards = 2;
    aligned.shard_aligned = true;
    aligned.bucket_indices = {{0, 128}, {128, 256}};
    aligned.per_bucket_numel_unpadded = {48, 52};
    aligned.param_index_map = {{4, 192, 232, 1}, {3, 128, 140, 1}, {1, 64, 80, 0}, {0, 0, 32, 0}};
    std::reverse(aligned.param_index_map.begin(), aligned.param_index_map.end());
    BufferKey aligned_key{DType::kBFloat16, DType::kFloat32, false, true};
    layout.layouts[aligned_key] = aligned;

    PerBufferParamLayout element;
    element.num_shards = 2;
    element.bucket_indices = {{0, 128}, {128, 256}};
    element.per_bucket_numel_unpadded = {100, 16};
    element.param_index_map = {{5, 0, 100, 0}, {2, 128, 144, 1}};
    BufferKey element_key{DType::kBFloat16, DType::kFloat32, false, false};
    layout.layouts[element_key] = element;
  }
};

TEST(LayoutStats, HandComputedLayout) {
  const HandLayout hand;
  const LayoutStats stats = compute_layout_stats(hand.params, hand.layout, hand.options);
  ASSERT_EQ(stats.ranks.size(), 2u);
  EXPECT_EQ(stats.ranks[0].rank, 0);
  EXPECT_EQ(stats.ranks[1].rank, 1);
  EXPECT_EQ(stats.ranks[0].numel, 32 + 12 + 64 + 16);
  EXPECT_EQ(stats.ranks[1].numel, 16 + 40 + 36);
  EXPECT_DOUBLE_EQ(stats.ranks[0].ns_cost, 128 + 24 + 64 + 16);
  EXPECT_DOUBLE_EQ(stats.ranks[1].ns_cost, 64 + 160 + 36);
  EXPECT_EQ(stats.numel_unpadded, 216);
  EXPECT_EQ(stats.numel_padded, 512);
  EXPECT_DOUBLE_EQ(stats.padding_fraction, 1.0 - 216.0 / 512.0);
  EXPECT_DOUBLE_EQ(stats.ns_cost_max_over_mean, 260.0 / 246.0);
}

TEST(LayoutReport, JsonTextAndSvgShowTheHandLayout) {
  const HandLayout hand;
  const LayoutStats stats = compute_layout_stats(hand.params, hand.layout, hand.options);
  const LayoutReportInput input{"hand", &hand.params, &hand.layout, &hand.options, &stats};

  const auto doc = nlohmann::json::parse(render_layout_json(input));
  EXPECT_EQ(doc["dp"], 2);
  EXPECT_EQ(doc["expert_dp"], 2);
  ASSERT_EQ(doc["buffers"].size(), 2u);
  // std::map orders the element-sharded key (is_layer_wise = false) first.
  const auto& element = doc["buffers"][0];
  const auto& aligned = doc["buffers"][1];
  EXPECT_EQ(element["layer_wise"], false);
  EXPECT_EQ(element["numel"], 256);
  EXPECT_EQ(element["numel_unpadded"], 116);
  for (const auto& p : element["params"]) EXPECT_TRUE(p["shard"].is_null());
  EXPECT_EQ(aligned["layer_wise"], true);
  EXPECT_EQ(aligned["num_shards"], 2);
  EXPECT_EQ(aligned["numel_unpadded"], 100);
  ASSERT_EQ(aligned["buckets"].size(), 2u);
  EXPECT_EQ(aligned["buckets"][1]["start"], 128);
  EXPECT_EQ(aligned["buckets"][1]["numel_unpadded"], 52);
  std::map<std::string, int> shards;
  for (const auto& p : aligned["params"]) shards[p["name"]] = p["shard"];
  EXPECT_EQ(shards, (std::map<std::string, int>{{"p0", 0}, {"p1", 1}, {"p3", 0}, {"p4", 1}}));
  EXPECT_EQ(doc["ranks"][1]["numel"], 92);
  EXPECT_DOUBLE_EQ(doc["ranks"][1]["ns_cost"].get<double>(), 260.0);
  EXPECT_EQ(doc["totals"]["numel_padded"], 512);
  EXPECT_DOUBLE_EQ(doc["totals"]["padding_fraction"].get<double>(), 1.0 - 216.0 / 512.0);

  const std::string text = render_layout_text(input);
  EXPECT_NE(text.find("totals: unpadded 216, padded 512, padding 57.812%"), std::string::npos)
      << text;
  const std::string svg = render_layout_svg(input);
  EXPECT_EQ(svg.rfind("<?xml", 0), 0u);
  EXPECT_NE(svg.find("<title>p4 [192, 232) bucket 1, shard 1, 40 elements</title>"),
            std::string::npos);
  EXPECT_NE(svg.find("<title>p5 [0, 100) bucket 0, 100 elements</title>"), std::string::npos);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
}

TEST(LayoutStats, BufferWithFewerShardsThanRanksLoadsEveryGroup) {
  // An expert buffer over expert-dp 1 next to dp 2: both ranks update all of it.
  HandLayout hand;
  hand.options.expert_data_parallel_size = 1;
  hand.params.push_back(make_param("expert", {4, 4}));
  hand.params.back().expert_parallel = true;
  PerBufferParamLayout expert;
  expert.num_shards = 1;
  expert.shard_aligned = true;
  expert.bucket_indices = {{0, 64}};
  expert.per_bucket_numel_unpadded = {16};
  expert.param_index_map = {{6, 0, 16, 0}};
  hand.layout.layouts[BufferKey{DType::kBFloat16, DType::kFloat32, true, true}] = expert;
  const LayoutStats stats = compute_layout_stats(hand.params, hand.layout, hand.options);
  ASSERT_EQ(stats.ranks.size(), 2u);
  EXPECT_EQ(stats.ranks[0].numel, 124 + 16);
  EXPECT_EQ(stats.ranks[1].numel, 92 + 16);
  EXPECT_DOUBLE_EQ(stats.ranks[0].ns_cost, 232 + 64);
  EXPECT_DOUBLE_EQ(stats.ranks[1].ns_cost, 260 + 64);
  EXPECT_EQ(stats.numel_unpadded, 216 + 16);
  EXPECT_EQ(stats.numel_padded, 512 + 64);
}

TEST(LayoutStats, EmptyLayoutIsPerfectlyBalanced) {
  LayoutOptions options;
  options.data_parallel_size = 4;
  const LayoutStats stats = compute_layout_stats({}, FullParamLayout{}, options);
  EXPECT_EQ(stats.ranks.size(), 4u);
  EXPECT_EQ(stats.numel_padded, 0);
  EXPECT_DOUBLE_EQ(stats.padding_fraction, 0.0);
  EXPECT_DOUBLE_EQ(stats.ns_cost_max_over_mean, 1.0);
}

// Element-by-element reference for element-sharded buffers: rank r owns the elements of
// [bucket_start + r * shard, bucket_start + (r + 1) * shard) that belong to some param.
std::vector<std::int64_t> reference_element_numel(const FullParamLayout& layout, int num_ranks) {
  std::vector<std::int64_t> numel(static_cast<std::size_t>(num_ranks), 0);
  for (const auto& [key, buffer] : layout.layouts) {
    std::vector<char> real(static_cast<std::size_t>(buffer.numel()), 0);
    for (const auto& range : buffer.param_index_map) {
      for (std::int64_t i = range.start; i < range.end; ++i) real[static_cast<std::size_t>(i)] = 1;
    }
    for (const auto& bucket : buffer.bucket_indices) {
      const std::int64_t shard = bucket.numel() / buffer.num_shards;
      for (std::int64_t i = bucket.start; i < bucket.end; ++i) {
        const auto s = (i - bucket.start) / shard;
        if (!real[static_cast<std::size_t>(i)]) continue;
        for (int r = 0; r < num_ranks; ++r) {
          if (r % buffer.num_shards == s) ++numel[static_cast<std::size_t>(r)];
        }
      }
    }
  }
  return numel;
}

TEST(LayoutStats, MatchesElementwiseReferenceOnRealLayouts) {
  for (const char* model : {"gpt-tiny", "moe-tiny"}) {
    for (auto algorithm : {LayoutAlgorithm::kDistributed, LayoutAlgorithm::kLayerWise}) {
      for (int dp : {1, 2, 3, 4, 8}) {
        SCOPED_TRACE(::testing::Message()
                     << model << " dp " << dp << " algorithm " << static_cast<int>(algorithm));
        const ParamList params = bundled_model_spec(model).params;
        LayoutOptions options;
        options.algorithm = algorithm;
        options.data_parallel_size = dp;
        options.expert_data_parallel_size = dp % 2 == 0 ? dp / 2 : dp;
        options.bucket_size = 20000;
        const FullParamLayout layout = compute_full_param_layout(params, options);
        const LayoutStats stats = compute_layout_stats(params, layout, options);
        ASSERT_EQ(stats.ranks.size(), static_cast<std::size_t>(dp));
        const auto reference = reference_element_numel(layout, dp);
        for (int r = 0; r < dp; ++r) {
          EXPECT_EQ(stats.ranks[static_cast<std::size_t>(r)].numel,
                    reference[static_cast<std::size_t>(r)])
              << "rank " << r;
        }
        std::int64_t model_numel = 0;
        for (const auto& p : params) model_numel += p.numel();
        EXPECT_EQ(stats.numel_unpadded, model_numel);
        EXPECT_GE(stats.numel_padded, stats.numel_unpadded);
        EXPECT_GE(stats.ns_cost_max_over_mean, 1.0);
      }
    }
  }
}

}  // namespace
}  // namespace shardwise
