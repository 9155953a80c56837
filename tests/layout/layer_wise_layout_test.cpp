// Shard-aligned layer-wise layout: concrete rules and quality on hand-built buffers.
#include <gtest/gtest.h>

#include "layout/layout_test_models.hpp"
#include "shardwise/layout/baseline_layouts.hpp"
#include "shardwise/layout/buffer_grouping.hpp"
#include "shardwise/layout/layout_algorithms.hpp"

namespace shardwise {
namespace {

using layout_test::check_shard_aligned;
using layout_test::matrix;
using layout_test::padding_elements;
using layout_test::vec;

using layout_test::whole_model;

std::string check(const ParamList& params, const PerBufferParamLayout& layout,
                  const BufferLayoutInput& input) {
  return check_shard_aligned(params, layout, input.buffer_params, input.data_parallel_size,
                             input.pad_for_high_nccl_busbw, input.bucket_size, true);
}

// Sum over params of their 64-aligned footprints: what a layout with no padding beyond
// alignment occupies.
std::int64_t aligned_footprint(const ParamList& params) {
  std::int64_t total = 0;
  for (const auto& p : params) total += (layout_test::shape_numel(p) + 63) / 64 * 64;
  return total;
}

ParamList block_stack(int layers, std::int64_t h) {
  layout_test::GptShape shape;
  shape.layers = layers;
  shape.hidden = h;
  shape.ffn = 4 * h;
  shape.norms = false;
  return layout_test::gpt_model(shape);
}

TEST(LayerWiseLayout, IdenticalBlocksPackWithoutPadding) {
  // 16 identical blocks of qkv/proj/fc1/fc2: every matrix count (16) divides over dp, so shards
  // can be made identical, whatever bucket_size asks for. That is the plain cut search; the
  // overlap-aware one (the default) may trade up to half a point of padding for a smaller last
  // bucket.
  for (std::int64_t h : {256, 100}) {
    const ParamList params = block_stack(16, h);
    const std::int64_t layer = 12 * h * h;
    for (int dp : {1, 2, 4, 8, 16}) {
      for (std::optional<std::int64_t> bucket :
           {std::optional<std::int64_t>{}, std::optional<std::int64_t>{1000},
            std::optional<std::int64_t>{layer}, std::optional<std::int64_t>{3 * layer}}) {
        for (const bool aware : {false, true}) {
          auto input = whole_model(params, dp, bucket);
          input.overlap_aware_cuts = aware;
          const auto layout = compute_layer_wise_layout(input);
          EXPECT_EQ(check(params, layout, input), "");
          // dp == 1 still rounds a bucket to the 128-element shard divisor.
          if (dp == 1) continue;
          const auto footprint = static_cast<double>(aligned_footprint(params));
          const auto numel = static_cast<double>(layout.numel());
          if (aware) {
            EXPECT_LE(numel - footprint, 0.005 * footprint) << "h " << h << " dp " << dp;
          } else {
            EXPECT_EQ(numel, footprint)
                << "h " << h << " dp " << dp << " bucket " << bucket.value_or(-1) << ": "
                << layout.bucket_indices.size() << " buckets";
          }
        }
      }
    }
  }
}

TEST(LayerWiseLayout, ParamThatFitsIntoShardPaddingJoinsTheBucket) {
  // Backprop order A (6400), B (3840), C (1920); bucket_size 6400 is reached by A alone.
  ParamList params = {vec("C", 1920), vec("B", 3840), vec("A", 6400)};
  params[0].shape = {30, 64};
  params[1].shape = {60, 64};
  params[2].shape = {100, 64};
  const auto input = whole_model(params, 2, 6400);
  const auto layout = compute_layer_wise_layout(input);
  EXPECT_EQ(check(params, layout, input), "");
  // One bucket of two 6400-element shards: A alone, B and C together.
  ASSERT_EQ(layout.bucket_indices.size(), 1u);
  EXPECT_EQ(layout.numel(), 12800);
  EXPECT_EQ(layout.per_bucket_numel_unpadded[0], 12160);
  EXPECT_NE(layout.owner_shard(layout.param_index_map[0]),
            layout.owner_shard(layout.param_index_map[1]));
  EXPECT_EQ(layout.owner_shard(layout.param_index_map[1]),
            layout.owner_shard(layout.param_index_map[2]));
  // The LPT-floor baseline (Megatron-LM's rule) keeps its chunk open past A (6400 < int(2 x 6400 x
  // 0.9) = 11520) and B (10240) until C (12160): the same single bucket of 2 x 6400.
  const auto megatron = compute_lpt_floor_layer_wise_layout(input);
  EXPECT_EQ(megatron.numel(), 12800);
  ASSERT_EQ(megatron.bucket_indices.size(), 1u);
  EXPECT_EQ(check_shard_aligned(params, megatron, input.buffer_params, 2, false, 6400, false), "");
}

TEST(LayerWiseLayout, SharedEmbeddingIsolatedAtItsBackpropPosition) {
  ParamList params;
  ParamInfo emb = matrix("embedding", 500, 64);
  emb.shared_embedding = true;
  params.push_back(emb);
  for (int i = 0; i < 6; ++i) params.push_back(matrix(str_cat("w", i), 64, 64));
  params.push_back(emb);
  params.back().name = "output";
  for (int dp : {1, 3, 4}) {
    const auto input = whole_model(params, dp, 100);
    const auto layout = compute_layer_wise_layout(input);
    ASSERT_EQ(check(params, layout, input), "") << dp;
    const auto& map = layout.param_index_map;
    // First in backprop: the output embedding, alone in bucket 0; last: the input embedding.
    EXPECT_EQ(map.front().param, 7u);
    EXPECT_EQ(map.front().bucket, 0);
    EXPECT_EQ(map[1].bucket, 1);
    EXPECT_EQ(map.back().param, 0u);
    EXPECT_EQ(map.back().bucket, map[map.size() - 2].bucket + 1);
    EXPECT_EQ(layout.per_bucket_numel_unpadded.front(), 32000);
    // Tied embeddings go to shard 0 (rank 0), at the start of their bucket, as in Megatron-LM,
    // whatever the NS balance of the other buckets would prefer.
    EXPECT_EQ(layout.owner_shard(map.front()), 0) << dp;
    EXPECT_EQ(map.front().start, layout.bucket_indices.front().start) << dp;
    EXPECT_EQ(layout.owner_shard(map.back()), 0) << dp;
    EXPECT_EQ(map.back().start, layout.bucket_indices.back().start) << dp;
    const auto megatron = compute_lpt_floor_layer_wise_layout(input);
    EXPECT_EQ(megatron.owner_shard(megatron.param_index_map.front()), 0) << dp;
    EXPECT_EQ(megatron.owner_shard(megatron.param_index_map.back()), 0) << dp;
  }
}

TEST(LayerWiseLayout, SingleBucketWithoutBucketSizeAndShardDivisor) {
  ParamList params = {matrix("a", 10, 10), matrix("b", 3, 7), vec("c", 1)};
  const auto input = whole_model(params, 3, std::nullopt);
  const auto layout = compute_layer_wise_layout(input);
  EXPECT_EQ(check(params, layout, input), "");
  ASSERT_EQ(layout.bucket_indices.size(), 1u);
  // Three one-slot params over three shards; the dp=3 shard divisor is 128.
  EXPECT_EQ(layout.numel(), 3 * 128);
  EXPECT_EQ(layout.per_bucket_numel_unpadded[0], 122);
  std::vector<int> owners;
  for (const auto& r : layout.param_index_map) owners.push_back(layout.owner_shard(r));
  std::sort(owners.begin(), owners.end());
  EXPECT_EQ(owners, (std::vector<int>{0, 1, 2}));
}

// Per-rank Newton–Schulz work of a shard-aligned layout.
std::vector<double> rank_ns_cost(const ParamList& params, const PerBufferParamLayout& layout) {
  std::vector<double> cost(static_cast<std::size_t>(layout.num_shards), 0.0);
  for (const auto& r : layout.param_index_map) {
    cost[static_cast<std::size_t>(layout.owner_shard(r))] += newton_schulz_cost(params[r.param]);
  }
  return cost;
}

TEST(LayerWiseLayout, BalancesNewtonSchulzCostAcrossBuckets) {
  // Backprop order A, B, A, B: A = 256x256 (NS 2^24), B = 4096x16 (NS 2^20), equal numel.
  // bucket_size makes each (A, B) pair a bucket; in each the pair splits over the two shards.
  // The LPT-floor baseline gives rank 0 both A's; we send the second A to the rank that got B.
  ParamList params = {matrix("B1", 4096, 16), matrix("A1", 256, 256), matrix("B0", 4096, 16),
                      matrix("A0", 256, 256)};
  const auto input = whole_model(params, 2, 2 * 65536);
  const auto ours = compute_layer_wise_layout(input);
  ASSERT_EQ(check(params, ours, input), "");
  ASSERT_EQ(ours.bucket_indices.size(), 2u);
  EXPECT_EQ(padding_elements(params, ours), 0);
  const auto cost = rank_ns_cost(params, ours);
  EXPECT_DOUBLE_EQ(cost[0], cost[1]);
  const auto megatron = compute_lpt_floor_layer_wise_layout(input);
  const auto base = rank_ns_cost(params, megatron);
  EXPECT_DOUBLE_EQ(std::max(base[0], base[1]), 2.0 * (1 << 24));
}

TEST(LayerWiseLayout, BalancesNewtonSchulzCostInsideABucket) {
  // Four equal-numel params, two expensive: any 2+2 split has zero padding; ours pairs each
  // expensive param with a cheap one.
  ParamList params = {matrix("A0", 256, 256), matrix("A1", 256, 256), matrix("B0", 4096, 16),
                      matrix("B1", 4096, 16)};
  const auto input = whole_model(params, 2, std::nullopt);
  const auto layout = compute_layer_wise_layout(input);
  const auto cost = rank_ns_cost(params, layout);
  EXPECT_DOUBLE_EQ(cost[0], cost[1]);
}

TEST(LayerWiseLayout, Deterministic) {
  layout_test::GptShape shape;
  shape.layers = 24;
  shape.hidden = 320;
  shape.ffn = 1088;
  shape.vocab = 5000;
  shape.biases = true;
  const ParamList params = layout_test::gpt_model(shape);
  LayoutOptions options;
  options.data_parallel_size = 6;
  options.bucket_size = 1'000'000;
  options.all_layer_wise = true;
  const auto a = compute_full_param_layout(params, options);
  const auto b = compute_full_param_layout(params, options);
  EXPECT_EQ(a, b);
}

TEST(LayerWiseLayout, EmptyBufferAndDpOne) {
  ParamList params = {vec("a", 5)};
  BufferLayoutInput input;
  input.params = &params;
  input.data_parallel_size = 4;
  const auto empty = compute_layer_wise_layout(input);
  EXPECT_TRUE(empty.bucket_indices.empty());
  EXPECT_EQ(empty.numel(), 0);
  const auto one = compute_layer_wise_layout(whole_model(params, 1, 1));
  EXPECT_EQ(one.numel(), 128);
  EXPECT_EQ(one.owner_shard(one.param_index_map[0]), 0);
}

}  // namespace
}  // namespace shardwise
