// Default and DistributedOptimizer layouts: known values and a reference implementation of
// Megatron's ParamAndGradBuffer rules written independently here.
#include <gtest/gtest.h>

#include <random>

#include "layout/layout_test_models.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/layout/layout_algorithms.hpp"

namespace shardwise {
namespace {

using layout_test::vec;

using layout_test::whole_model;

std::vector<BucketRange> buckets(std::initializer_list<std::pair<std::int64_t, std::int64_t>> l) {
  std::vector<BucketRange> out;
  for (auto [s, e] : l) out.push_back({s, e});
  return out;
}

TEST(DistOptLayout, TwoParamsOneBucket) {
  ParamList params = {vec("a", 1000), vec("b", 1000)};
  const auto layout = compute_dist_opt_layout(whole_model(params, 4, std::nullopt));
  EXPECT_EQ(layout.bucket_indices, buckets({{0, 2048}}));
  // Backprop order: b first.
  EXPECT_EQ(layout.param_index_map[0], (ParamRange{1, 0, 1000, 0}));
  EXPECT_EQ(layout.param_index_map[1], (ParamRange{0, 1024, 2024, 0}));
  EXPECT_EQ(layout.per_bucket_numel_unpadded, (std::vector<std::int64_t>{2024}));
  EXPECT_FALSE(layout.shard_aligned);
  EXPECT_EQ(layout.num_shards, 4);
}

TEST(DistOptLayout, BucketClosesOncePaddedSpanReachesBucketSize) {
  ParamList params = {vec("a", 5000), vec("b", 5000), vec("c", 5000)};
  const auto layout = compute_dist_opt_layout(whole_model(params, 2, 8000));
  EXPECT_EQ(layout.bucket_indices, buckets({{0, 10112}, {10112, 15232}}));
  // Unpadded counts the alignment gap inside the bucket: 5000 + 56 + 5000.
  EXPECT_EQ(layout.per_bucket_numel_unpadded, (std::vector<std::int64_t>{10056, 5000}));
  EXPECT_EQ(layout.param_index_map[1], (ParamRange{1, 5056, 10056, 0}));
  EXPECT_EQ(layout.param_index_map[2], (ParamRange{0, 10112, 15112, 1}));
}

TEST(DistOptLayout, SharedEmbeddingGetsItsOwnBucket) {
  // Forward: q, emb (shared), p -> backprop p, emb, q.
  ParamList params = {vec("q", 10), vec("emb", 1000), vec("p", 100)};
  params[1].shared_embedding = true;
  const auto layout = compute_dist_opt_layout(whole_model(params, 4, std::nullopt));
  EXPECT_EQ(layout.bucket_indices, buckets({{0, 128}, {128, 1152}, {1152, 1280}}));
  EXPECT_EQ(layout.per_bucket_numel_unpadded, (std::vector<std::int64_t>{128, 1000, 10}));
  EXPECT_EQ(layout.param_index_map[1], (ParamRange{1, 128, 1128, 1}));
  EXPECT_EQ(layout.param_index_map[2], (ParamRange{0, 1152, 1162, 2}));
}

TEST(DefaultLayout, NoPaddingBucketsCloseAtBucketSize) {
  ParamList params = {vec("a", 1000), vec("b", 1000), vec("c", 1000)};
  params[1].shared_embedding = true;  // plain DDP does not isolate it
  const auto layout = compute_default_layout(whole_model(params, 4, 1500));
  EXPECT_EQ(layout.bucket_indices, buckets({{0, 2000}, {2000, 3000}}));
  EXPECT_EQ(layout.per_bucket_numel_unpadded, (std::vector<std::int64_t>{2000, 1000}));
  EXPECT_EQ(layout.param_index_map[2], (ParamRange{0, 2000, 3000, 1}));
  const auto single = compute_default_layout(whole_model(params, 4, std::nullopt));
  EXPECT_EQ(single.bucket_indices, buckets({{0, 3000}}));
}

TEST(LayoutInput, RejectsBadInput) {
  ParamList params = {vec("a", 10), vec("b", 10)};
  auto input = whole_model(params, 2, 100);
  input.data_parallel_size = 0;
  EXPECT_THROW(compute_dist_opt_layout(input), InvalidArgument);
  input = whole_model(params, 2, 0);
  EXPECT_THROW(compute_layer_wise_layout(input), InvalidArgument);
  input = whole_model(params, 2, 100);
  input.buffer_params = {1, 0};  // not forward order
  EXPECT_THROW(compute_default_layout(input), InvalidArgument);
  input.buffer_params = {0, 5};
  EXPECT_THROW(compute_default_layout(input), InvalidArgument);
  input = whole_model(params, 2, 100);
  input.param_indices = {0};
  EXPECT_THROW(compute_dist_opt_layout(input), InvalidArgument);
  input.params = nullptr;
  EXPECT_THROW(compute_dist_opt_layout(input), InvalidArgument);
}

// Megatron's loop, transcribed independently (with the embedding placed at the padded bucket
// end, see dist_opt_layout.cpp).
PerBufferParamLayout reference_dist_opt(const ParamList& params, int dp,
                                        std::optional<std::int64_t> bucket_size, bool hb) {
  auto pad = [](std::int64_t v, std::int64_t d) { return (v + d - 1) / d * d; };
  const std::int64_t div = std::lcm(std::lcm(std::int64_t{dp}, std::int64_t{128}),
                                    hb ? std::int64_t{65536} : std::int64_t{1});
  PerBufferParamLayout out;
  out.num_shards = dp;
  std::int64_t start = 0, bucket_start = 0;
  int bucket = 0, in_bucket = 0;
  auto close = [&](std::int64_t end) {
    out.per_bucket_numel_unpadded.push_back(end - bucket_start);
    const std::int64_t padded = pad(end, div);
    out.bucket_indices.push_back({bucket_start, padded});
    bucket_start = padded;
    ++bucket;
    in_bucket = 0;
    return padded;
  };
  for (std::size_t k = params.size(); k-- > 0;) {
    const std::int64_t n = layout_test::shape_numel(params[k]);
    start = pad(start, 64);
    if (params[k].shared_embedding && in_bucket > 0) start = close(start);
    out.param_index_map.push_back({k, start, start + n, bucket});
    out.param_indices.push_back(static_cast<std::int64_t>(k));
    ++in_bucket;
    const std::int64_t end = start + n;
    if ((bucket_size && end - bucket_start >= *bucket_size) || params[k].shared_embedding) {
      start = close(end);
    } else {
      start = end;
    }
  }
  if (in_bucket > 0) close(start);
  return out;
}

TEST(DistOptLayout, MatchesReferenceOnRandomBuffers) {
  std::mt19937_64 rng(1234);
  for (int trial = 0; trial < 200; ++trial) {
    ParamList params;
    const int n = 1 + static_cast<int>(rng() % 60);
    for (int i = 0; i < n; ++i) {
      params.push_back(vec(str_cat("p", i), static_cast<std::int64_t>(rng() % 5000)));
      params.back().shared_embedding = rng() % 10 == 0;
    }
    const int dps[] = {1, 2, 3, 4, 6, 8, 16, 64, 256};
    const int dp = dps[rng() % 9];
    const bool hb = rng() % 4 == 0;
    std::optional<std::int64_t> bucket;
    if (rng() % 5 != 0) bucket = 1 + static_cast<std::int64_t>(rng() % 20000);
    auto input = whole_model(params, dp, bucket);
    input.pad_for_high_nccl_busbw = hb;
    const auto layout = compute_dist_opt_layout(input);
    ASSERT_EQ(layout, reference_dist_opt(params, dp, bucket, hb)) << "trial " << trial;
    LayoutOptions options;
    options.algorithm = LayoutAlgorithm::kDistributed;
    options.data_parallel_size = dp;
    options.bucket_size = bucket;
    options.pad_buckets_for_high_nccl_busbw = hb;
    ASSERT_NO_THROW(validate_layout(params, layout, BufferKey{DType::kBFloat16}, options));
  }
}

}  // namespace
}  // namespace shardwise
