#include "shardwise/ddp/distributed_data_parallel.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "ddp_test_support.hpp"
#include "fake_process_group.hpp"
#include "shardwise/layout/layout_algorithms.hpp"

namespace shardwise {
namespace {

using testing_support::expect_error;
using testing_support::FakeProcessGroup;
using testing_support::make_param;
using testing_support::pack_layout;
using testing_support::RecordedCall;

constexpr BufferKey kDenseKey{DType::kFloat32, DType::kFloat32, false, false};
constexpr BufferKey kExpertKey{DType::kFloat32, DType::kFloat32, true, false};

// Eight fp32 params of distinct sizes; backprop order 7..0 packed into 4 buckets of two params.
ParamList eight_params() {
  ParamList params;
  for (int i = 0; i < 8; ++i) params.push_back(make_param("layer" + std::to_string(i), {i + 3}));
  return params;
}

FullParamLayout four_bucket_layout(const ParamList& params, int shards) {
  FullParamLayout full;
  full.layouts[kDenseKey] = pack_layout(params, {{7, 6}, {5, 4}, {3, 2}, {1, 0}}, shards);
  return full;
}

DistributedDataParallelConfig overlap_config() {
  DistributedDataParallelConfig c;
  c.overlap_grad_reduce = true;
  c.use_distributed_optimizer = true;
  return c;
}

struct Harness {
  std::shared_ptr<FakeProcessGroup> dp;
  std::unique_ptr<DistributedDataParallel> ddp;
};

Harness make_ddp(DistributedDataParallelConfig config, int rank = 1, int size = 2) {
  Harness h;
  h.dp = std::make_shared<FakeProcessGroup>(rank, size, "dp");
  const ParamList params = eight_params();
  h.ddp = std::make_unique<DistributedDataParallel>(params, four_bucket_layout(params, size),
                                                    config, DataParallelGroups{h.dp, nullptr});
  return h;
}

TEST(DdpConfig, BucketSizeDefaultsAndValidation) {
  DistributedDataParallelConfig c;
  EXPECT_EQ(c.resolved_bucket_size(8), std::nullopt);
  c.overlap_grad_reduce = true;
  EXPECT_EQ(c.resolved_bucket_size(8), 40'000'000);
  EXPECT_EQ(c.resolved_bucket_size(64), 64'000'000);
  c.bucket_size = 1234;
  EXPECT_EQ(c.resolved_bucket_size(64), 1234);
  const LayoutOptions o = c.layout_options(LayoutAlgorithm::kDistributed, 4, 2);
  EXPECT_EQ(o.bucket_size, 1234);
  EXPECT_EQ(o.data_parallel_size, 4);
  EXPECT_EQ(o.expert_dp(), 2);

  DistributedDataParallelConfig bad;
  bad.bucket_size = 0;
  expect_error<ConfigError>([&] { bad.validate(); }, {"ddp.bucket_size"});
  bad = {};
  bad.align_param_gather = true;
  expect_error<ConfigError>([&] { bad.validate(); }, {"ddp.align_param_gather"});
  bad = {};
  bad.overlap_param_gather = true;
  expect_error<ConfigError>([&] { bad.validate(); }, {"ddp.use_distributed_optimizer"});
  bad = {};
  bad.num_buckets_per_group = 0;
  expect_error<ConfigError>([&] { bad.validate(); }, {"ddp.num_buckets_per_group"});
  bad = {};
  bad.per_token_loss = true;
  bad.average_in_collective = true;
  expect_error<ConfigError>([&] { bad.validate(); },
                            {"ddp.per_token_loss", "average_in_collective"});
}

TEST(GradientScaling, SumAverageAndPerTokenModes) {
  DistributedDataParallelConfig c;
  GradientScaling s = gradient_scaling(c, 8, 2);
  EXPECT_DOUBLE_EQ(s.dense, 0.125);
  EXPECT_DOUBLE_EQ(s.expert, 0.125);
  EXPECT_EQ(s.op, ReduceOp::kSum);
  c.average_in_collective = true;
  s = gradient_scaling(c, 8, 2);
  EXPECT_DOUBLE_EQ(s.dense, 1.0);
  EXPECT_DOUBLE_EQ(s.expert, 0.25);  // AVG over 2 expert ranks * 2/8 = 1/8, as for dense
  EXPECT_EQ(s.op, ReduceOp::kAvg);
  c.average_in_collective = false;
  c.per_token_loss = true;
  s = gradient_scaling(c, 8, 2);
  EXPECT_DOUBLE_EQ(s.dense, 1.0);
  EXPECT_DOUBLE_EQ(s.expert, 1.0);
}

TEST(BucketGroups, FormationFollowsOverlapAndGroupSize) {
  {
    Harness h = make_ddp(overlap_config());
    ASSERT_EQ(h.ddp->bucket_groups().size(), 4u);
    for (int g = 0; g < 4; ++g) {
      EXPECT_EQ(h.ddp->bucket_groups()[g]->index(), g);
      EXPECT_EQ(h.ddp->bucket_groups()[g]->bucket_indices(), std::vector<int>{g});
    }
    EXPECT_EQ(h.ddp->bucket_group_of(7), 0);
    EXPECT_EQ(h.ddp->bucket_group_of(4), 1);
    EXPECT_EQ(h.ddp->bucket_group_of(0), 3);
    EXPECT_TRUE(h.ddp->bucket_groups()[1]->contains(5));
    EXPECT_FALSE(h.ddp->bucket_groups()[1]->contains(3));
  }
  {
    DistributedDataParallelConfig c = overlap_config();
    c.num_buckets_per_group = 3;
    Harness h = make_ddp(c);
    ASSERT_EQ(h.ddp->bucket_groups().size(), 2u);
    EXPECT_EQ(h.ddp->bucket_groups()[0]->bucket_indices(), (std::vector<int>{0, 1, 2}));
    EXPECT_EQ(h.ddp->bucket_groups()[1]->bucket_indices(), (std::vector<int>{3}));
    EXPECT_EQ(h.ddp->bucket_groups()[0]->params(), (std::vector<ParamId>{7, 6, 5, 4, 3, 2}));
  }
  {
    DistributedDataParallelConfig c;  // no overlap: one group per buffer
    c.use_distributed_optimizer = true;
    Harness h = make_ddp(c);
    ASSERT_EQ(h.ddp->bucket_groups().size(), 1u);
    EXPECT_EQ(h.ddp->bucket_groups()[0]->bucket_indices(), (std::vector<int>{0, 1, 2, 3}));
  }
}

TEST(BucketGroups, BuffersInterleaveInBackpropOrder) {
  // Dense params 0,1,4,5 and expert params 2,3: backprop meets 5,4 (dense) then 3,2 (expert),
  // then 1,0 (dense).
  ParamList params;
  for (int i = 0; i < 6; ++i) {
    params.push_back(make_param("p" + std::to_string(i), {4}, DType::kFloat32, i == 2 || i == 3));
  }
  FullParamLayout full;
  full.layouts[kDenseKey] = pack_layout(params, {{5, 4}, {1, 0}}, 2);
  full.layouts[kExpertKey] = pack_layout(params, {{3}, {2}}, 1);
  auto dp = std::make_shared<FakeProcessGroup>(0, 2, "dp");
  auto edp = std::make_shared<FakeProcessGroup>(0, 1, "edp");
  DistributedDataParallel ddp(params, full, overlap_config(), {dp, edp});
  ASSERT_EQ(ddp.bucket_groups().size(), 4u);
  EXPECT_EQ(ddp.bucket_group_of(5), 0);
  EXPECT_EQ(ddp.bucket_group_of(3), 1);
  EXPECT_EQ(ddp.bucket_group_of(2), 2);
  EXPECT_EQ(ddp.bucket_group_of(0), 3);
  EXPECT_EQ(ddp.bucket_groups()[1]->group(), edp);
  EXPECT_EQ(ddp.bucket_groups()[0]->group(), dp);
  EXPECT_DOUBLE_EQ(ddp.buffer(kExpertKey).buckets()[0].gradient_scaling_factor, 0.5);
  // Layout checked on both groups, once each when they agree (the DP group compares the param
  // count only after a mismatch: see the failing check below).
  EXPECT_EQ(dp->checked_what,
            std::vector<std::string>{"parameter layout (shapes, dtypes, buckets)"});
  EXPECT_EQ(edp->checked_values, dp->checked_values);
}

TEST(GradSync, DispatchOrderIsBucketOrderWhateverTheReadyOrder) {
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 20; ++trial) {
    Harness h = make_ddp(overlap_config(), /*rank=*/1, /*size=*/2);
    std::vector<ParamId> order(8);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    // Fill grads with 1 so the 1/dp pre-scaling is visible.
    float* g = h.ddp->buffer(kDenseKey).grad_data().as<float>();
    std::fill(g, g + h.ddp->buffer(kDenseKey).numel(), 1.0f);

    std::vector<bool> ready(8, false);
    for (ParamId p : order) {
      h.ddp->register_grad_ready(p);
      ready[p] = true;
      // Expected: the longest prefix of complete groups (in index order) has been dispatched.
      std::size_t prefix = 0;
      while (prefix < 4 && ready[7 - 2 * prefix] && ready[6 - 2 * prefix]) ++prefix;
      ASSERT_EQ(h.dp->calls.size(), prefix) << "trial " << trial << " after param " << p;
    }
    h.ddp->finish_grad_sync();
    ASSERT_EQ(h.dp->calls.size(), 4u);
    EXPECT_EQ(h.ddp->grad_dispatch_log(), (std::vector<int>{0, 1, 2, 3}));
    for (int b = 0; b < 4; ++b) {
      const Bucket& bucket = h.ddp->buffer(kDenseKey).buckets()[b];
      const RecordedCall& call = h.dp->calls[b];
      EXPECT_EQ(call.kind, CollectiveKind::kReduceScatter);
      EXPECT_EQ(call.op, ReduceOp::kSum);
      EXPECT_EQ(call.input, bucket.grad_data.data);
      EXPECT_EQ(call.input_numel, bucket.numel());
      EXPECT_EQ(call.output, bucket.grad_shard(1).data);  // in place: this rank's shard
      EXPECT_EQ(call.output_numel, bucket.numel() / 2);
    }
    for (std::int64_t i = 0; i < h.ddp->buffer(kDenseKey).numel(); ++i) EXPECT_EQ(g[i], 0.5f);
    EXPECT_EQ(h.dp->waits, 4);
  }
}

TEST(GradSync, WithoutOverlapEverythingIsDispatchedAtFinish) {
  DistributedDataParallelConfig c;  // plain DDP: all-reduce, one group
  Harness h = make_ddp(c);
  for (ParamId p = 0; p < 8; ++p) h.ddp->register_grad_ready(p);
  EXPECT_TRUE(h.dp->calls.empty());
  h.ddp->finish_grad_sync();
  ASSERT_EQ(h.dp->calls.size(), 4u);  // one all-reduce per bucket
  for (const RecordedCall& call : h.dp->calls) EXPECT_EQ(call.kind, CollectiveKind::kAllReduce);
  EXPECT_EQ(h.dp->calls[0].input, h.ddp->buffer(kDenseKey).grad_data().data);
  // A second iteration may be run without registering anything.
  h.ddp->finish_grad_sync();
  EXPECT_EQ(h.dp->calls.size(), 8u);
}

TEST(GradSync, AverageInCollectiveUsesAvgAndNoPrescale) {
  DistributedDataParallelConfig c = overlap_config();
  c.average_in_collective = true;
  Harness h = make_ddp(c);
  float* g = h.ddp->buffer(kDenseKey).grad_data().as<float>();
  g[0] = 3.0f;
  h.ddp->finish_grad_sync();
  EXPECT_EQ(g[0], 3.0f);
  for (const RecordedCall& call : h.dp->calls) EXPECT_EQ(call.op, ReduceOp::kAvg);
}

TEST(GradSync, RegistrationErrorsNameTheParam) {
  Harness h = make_ddp(overlap_config());
  h.ddp->register_grad_ready(3);
  expect_error<InvalidArgument>([&] { h.ddp->register_grad_ready(3); }, {"'layer3'", "twice"});
  expect_error<InvalidArgument>([&] { h.ddp->register_grad_ready(42); },
                                {"param id 42", "not in any buffer"});
  h.ddp->finish_grad_sync();
  // A new iteration accepts the param again.
  EXPECT_NO_THROW(h.ddp->register_grad_ready(3));
}

TEST(GradSync, OnlyTheLastMicrobatchSyncs) {
  Harness h = make_ddp(overlap_config());
  for (int micro = 0; micro < 2; ++micro) {
    auto scope = h.ddp->no_sync();
    EXPECT_FALSE(h.ddp->is_last_microbatch());
    for (ParamId p = 0; p < 8; ++p) h.ddp->register_grad_ready(p);
    expect_error<InvalidArgument>([&] { h.ddp->finish_grad_sync(); }, {"no_sync"});
  }
  EXPECT_TRUE(h.ddp->is_last_microbatch());
  EXPECT_TRUE(h.dp->calls.empty());
  for (ParamId p = 8; p-- > 0;) h.ddp->register_grad_ready(p);
  EXPECT_EQ(h.dp->calls.size(), 4u);
  h.ddp->finish_grad_sync();
  EXPECT_EQ(h.dp->calls.size(), 4u);
}

TEST(GradSync, ReadyCountsAreLearntOnTheFirstIteration) {
  Harness h = make_ddp(overlap_config());
  // Iteration 1: params 5 and 0 never get a gradient (unused).
  for (ParamId p : {7, 6, 4, 3, 2, 1}) h.ddp->register_grad_ready(p);
  // Groups 0 is complete; group 1 waits for param 5 (not yet known to be unused).
  EXPECT_EQ(h.dp->calls.size(), 1u);
  h.ddp->finish_grad_sync();
  EXPECT_EQ(h.dp->calls.size(), 4u);
  // Iteration 2: groups complete without the unused params.
  for (ParamId p : {7, 6, 4, 3, 2, 1}) h.ddp->register_grad_ready(p);
  EXPECT_EQ(h.dp->calls.size(), 8u);
  h.ddp->finish_grad_sync();
  EXPECT_EQ(h.dp->calls.size(), 8u);
  // Iteration 3: an unused param suddenly producing a gradient is an error, not a silent drop.
  expect_error<InvalidArgument>([&] { h.ddp->register_grad_ready(5); },
                                {"'layer5'", "first iteration"});
}

TEST(GradSync, ZeroGradBufferClearsGradsAndReadiness) {
  Harness h = make_ddp(overlap_config());
  float* g = h.ddp->buffer(kDenseKey).grad_data().as<float>();
  g[3] = 2.0f;
  h.ddp->register_grad_ready(7);
  h.ddp->zero_grad_buffer();
  EXPECT_EQ(g[3], 0.0f);
  EXPECT_NO_THROW(h.ddp->register_grad_ready(7));
}

TEST(GradSync, LegacyPathAllReducesTheWholeBuffer) {
  DistributedDataParallelConfig c = overlap_config();
  c.use_legacy_param_sync = true;
  Harness h = make_ddp(c);
  for (ParamId p = 0; p < 8; ++p) h.ddp->register_grad_ready(p);
  h.ddp->finish_grad_sync();
  ASSERT_EQ(h.dp->calls.size(), 4u);
  std::int64_t total = 0;
  for (const RecordedCall& call : h.dp->calls) {
    EXPECT_EQ(call.kind, CollectiveKind::kAllReduce);
    total += call.input_numel;
  }
  EXPECT_EQ(total, h.ddp->buffer(kDenseKey).numel());
  expect_error<InvalidArgument>([&] { h.ddp->start_param_sync(); }, {"legacy_param_sync"});
}

TEST(ParamSync, OverlappedGathersChainInForwardOrder) {
  DistributedDataParallelConfig c = overlap_config();
  c.overlap_param_gather = true;
  Harness h = make_ddp(c);
  const auto& buckets = h.ddp->buffer(kDenseKey).buckets();
  h.ddp->start_param_sync();
  // Only the group the forward pass needs first (the last in backprop order) is in flight.
  ASSERT_EQ(h.dp->calls.size(), 1u);
  EXPECT_EQ(h.dp->calls[0].kind, CollectiveKind::kAllGather);
  EXPECT_EQ(h.dp->calls[0].output, buckets[3].param_data.data);
  EXPECT_EQ(h.dp->calls[0].input, buckets[3].param_shard(1).data);
  for (int g = 3; g >= 0; --g) {
    h.ddp->finish_param_sync(g);
    // Waiting on group g dispatched group g-1.
    ASSERT_EQ(h.dp->calls.size(), static_cast<std::size_t>(4 - g + (g > 0 ? 1 : 0)));
    if (g > 0) {
      EXPECT_EQ(h.dp->calls.back().output, buckets[g - 1].param_data.data);
    }
  }
  EXPECT_EQ(h.dp->calls.size(), 4u);
  h.ddp->finish_param_sync(2);  // nothing requested any more: no-op
  EXPECT_EQ(h.dp->calls.size(), 4u);
}

TEST(ParamSync, AlignDispatchesAllAndForceSyncWaits) {
  DistributedDataParallelConfig c = overlap_config();
  c.overlap_param_gather = true;
  c.align_param_gather = true;
  Harness h = make_ddp(c);
  h.ddp->start_param_sync();
  ASSERT_EQ(h.dp->calls.size(), 4u);
  EXPECT_EQ(h.dp->calls[0].output, h.ddp->buffer(kDenseKey).buckets()[3].param_data.data);
  EXPECT_EQ(h.dp->calls[3].output, h.ddp->buffer(kDenseKey).buckets()[0].param_data.data);
  h.ddp->finish_all_param_sync();
  EXPECT_EQ(h.dp->calls.size(), 4u);
  EXPECT_EQ(h.dp->waits, 4);
  h.ddp->start_param_sync(/*force_sync=*/true);
  EXPECT_EQ(h.dp->calls.size(), 8u);
  EXPECT_EQ(h.dp->waits, 8);
}

TEST(ParamSync, PredicateSelectsBuffers) {
  ParamList params;
  for (int i = 0; i < 4; ++i) params.push_back(make_param("p" + std::to_string(i), {4}));
  const BufferKey layer_wise{DType::kFloat32, DType::kFloat32, false, true};
  FullParamLayout full;
  full.layouts[kDenseKey] = pack_layout(params, {{3}, {0}}, 2);
  full.layouts[layer_wise] = pack_layout(params, {{2, 1}}, 2);
  auto dp = std::make_shared<FakeProcessGroup>(0, 2, "dp");
  DistributedDataParallelConfig c = overlap_config();
  DistributedDataParallel ddp(params, full, c, {dp, nullptr});
  ddp.start_param_sync_for_bucket_groups(
      [](const BucketGroup& g) { return g.key().is_layer_wise; });
  ASSERT_EQ(dp->calls.size(), 1u);
  EXPECT_EQ(dp->calls[0].output, ddp.buffer(layer_wise).param_data().data);
  EXPECT_EQ(dp->calls[0].output_numel, 8);
  ddp.start_param_sync_for_bucket_groups(
      [](const BucketGroup& g) { return !g.key().is_layer_wise; });
  EXPECT_EQ(dp->calls.size(), 3u);
  EXPECT_EQ(ddp.local_shard_range(kDenseKey, 1), (BucketRange{4, 6}));
  EXPECT_EQ(ddp.local_shard_range(layer_wise, 0), (BucketRange{0, 4}));
}

TEST(LegacyParamSync, FlattensOwnedParamsAndCopiesBack) {
  DistributedDataParallelConfig c;
  c.use_legacy_param_sync = true;
  Harness h = make_ddp(c, /*rank=*/1, /*size=*/2);
  std::map<ParamId, int> owner;
  for (ParamId p = 0; p < 8; ++p) owner[p] = static_cast<int>(p % 2);
  h.ddp->legacy_param_sync(owner);
  ASSERT_EQ(h.dp->calls.size(), 1u);
  const RecordedCall& call = h.dp->calls[0];
  EXPECT_EQ(call.kind, CollectiveKind::kAllGatherV);
  // Rank 0 owns layers 0,2,4,6 (3+5+7+9 elements), rank 1 layers 1,3,5,7 (4+6+8+10).
  EXPECT_EQ(call.counts, (std::vector<std::int64_t>{24, 28}));
  EXPECT_EQ(call.input_numel, 28);
  EXPECT_EQ(call.output_numel, 52);

  owner.erase(3);
  expect_error<InvalidArgument>([&] { h.ddp->legacy_param_sync(owner); }, {"'layer3'", "no owner"});
  owner[3] = 2;
  expect_error<InvalidArgument>([&] { h.ddp->legacy_param_sync(owner); }, {"'layer3'", "rank 2"});
}

TEST(Construction, LayoutMustCoverParamsAndMatchGroups) {
  const ParamList params = eight_params();
  auto dp = std::make_shared<FakeProcessGroup>(0, 2, "dp");
  {
    FullParamLayout full;
    full.layouts[kDenseKey] = pack_layout(params, {{7, 6, 5, 4, 3, 2, 1}}, 2);
    expect_error<InvalidArgument>(
        [&] {
          DistributedDataParallel(params, full, {}, {dp, nullptr});
        },
        {"'layer0'", "no buffer"});
  }
  {
    FullParamLayout full = four_bucket_layout(params, 2);
    full.layouts[{DType::kFloat32, DType::kFloat32, false, true}] = pack_layout(params, {{0}}, 2);
    expect_error<InvalidArgument>(
        [&] {
          DistributedDataParallel(params, full, {}, {dp, nullptr});
        },
        {"'layer0'", "two buffers"});
  }
  {
    // Reduce-scatter needs one shard per rank of the group.
    expect_error<ShapeError>(
        [&] {
          DistributedDataParallel(params, four_bucket_layout(params, 1), overlap_config(),
                                  {dp, nullptr});
        },
        {"1 shards", "2 ranks"});
  }
  {
    FullParamLayout full;
    full.layouts[{DType::kFloat32, DType::kBFloat16, false, false}] =
        four_bucket_layout(params, 2).layouts.at(kDenseKey);
    expect_error<ShapeError>(
        [&] {
          DistributedDataParallel(params, full, {}, {dp, nullptr});
        },
        {"grad_reduce_in_fp32"});
  }
  {
    dp->fail_checks = true;
    dp->checked_what.clear();
    dp->checked_values.clear();
    expect_error<CommError>(
        [&] {
          DistributedDataParallel(params, four_bucket_layout(params, 2), {}, {dp, nullptr});
        },
        {"number of parameters"});
    // The hash disagreed, then the count was compared (and disagreed too, in this fake).
    EXPECT_EQ(dp->checked_what,
              (std::vector<std::string>{"parameter layout (shapes, dtypes, buckets)",
                                        "number of parameters"}));
    EXPECT_EQ(dp->checked_values.back(), params.size());
    dp->fail_checks = false;
  }
}

TEST(LayoutHash, ChangesWithAnythingRanksMustAgreeOn) {
  const ParamList params = eight_params();
  const FullParamLayout full = four_bucket_layout(params, 2);
  const std::uint64_t base = layout_hash(params, full);
  EXPECT_EQ(base, layout_hash(params, four_bucket_layout(params, 2)));
  ParamList renamed = params;
  renamed[2].name = "other";
  EXPECT_NE(base, layout_hash(renamed, full));
  ParamList reshaped = params;
  reshaped[2].shape = {1, 5};
  EXPECT_NE(base, layout_hash(reshaped, full));
  FullParamLayout moved = full;
  moved.layouts.at(kDenseKey).bucket_indices.back().end += 2;
  EXPECT_NE(base, layout_hash(params, moved));
  FullParamLayout rekeyed;
  rekeyed.layouts[kExpertKey] = full.layouts.at(kDenseKey);
  EXPECT_NE(base, layout_hash(params, rekeyed));
}

}  // namespace
}  // namespace shardwise

namespace shardwise {
namespace {

TEST(LegacyOwners, PingPongDealsDenseAndExpertParamsSeparately) {
  ParamList params;
  for (int i = 0; i < 6; ++i) {
    params.push_back(
        testing_support::make_param("p" + std::to_string(i), {i + 1}, DType::kFloat32, i >= 4));
  }
  FullParamLayout full;
  full.layouts[kDenseKey] = testing_support::pack_layout(params, {{3, 2, 1, 0}}, 2);
  full.layouts[kExpertKey] = testing_support::pack_layout(params, {{5, 4}}, 1);
  const std::map<ParamId, int> owner = ping_pong_owner_map(params, full, 2, 1);
  // Dense by numel ascending (p0..p3) dealt 0,1,1,0; both experts to the single expert rank.
  EXPECT_EQ(owner, (std::map<ParamId, int>{{0, 0}, {1, 1}, {2, 1}, {3, 0}, {4, 0}, {5, 0}}));
}

}  // namespace
}  // namespace shardwise

namespace shardwise {
namespace {

// Plain DDP (and the legacy layer-wise path) all-reduce whole buckets, so the default layout's
// unpadded buckets need not divide by dp: a 4-rank job over params of 3..10 elements (buckets of
// 13, 9 and 5 elements here) must build and all-reduce every bucket whole.
TEST(GradSync, AllReduceModesAcceptBucketsThatDpDoesNotDivide) {
  for (const bool legacy : {false, true}) {
    SCOPED_TRACE(legacy ? "legacy" : "ddp");
    DistributedDataParallelConfig c;
    c.overlap_grad_reduce = true;
    c.use_distributed_optimizer = false;
    c.use_legacy_param_sync = legacy;
    c.bucket_size = 8;
    auto dp = std::make_shared<FakeProcessGroup>(2, 4, "dp");
    const ParamList params = eight_params();
    FullParamLayout layout =
        compute_full_param_layout(params, c.layout_options(LayoutAlgorithm::kDefault, 4, 4));
    const PerBufferParamLayout& buffer = layout.layouts.at(kDenseKey);
    EXPECT_EQ(buffer.num_shards, 1);
    ASSERT_TRUE(std::any_of(buffer.bucket_indices.begin(), buffer.bucket_indices.end(),
                            [](const BucketRange& b) { return b.numel() % 4 != 0; }));
    DistributedDataParallel ddp(params, std::move(layout), c, DataParallelGroups{dp, nullptr});
    for (ParamId p = 0; p < 8; ++p) ddp.register_grad_ready(p);
    ddp.finish_grad_sync();
    std::int64_t total = 0;
    for (const RecordedCall& call : dp->calls) {
      EXPECT_EQ(call.kind, CollectiveKind::kAllReduce);
      total += call.input_numel;
    }
    EXPECT_EQ(total, ddp.buffer(kDenseKey).numel());
  }
}

}  // namespace
}  // namespace shardwise
