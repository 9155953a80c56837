// Layer-wise shard groups in DDP (S = dp/2: 2 at np 4, 1 at np 2): grads are reduce-scattered in
// the shard group and the owned shard all-reduced across the replicas, which must equal a full
// all-reduce within fp32 rounding and leave every replica with the same bits; params are
// all-gathered in the shard group; element-sharded buffers keep full-dp sharding; expert buffers
// (expert dp = dp here) are handled the same way, and with expert parallelism 2 in shard groups
// of the expert-DP group; and the bytes each rank moves are the formula of docs/shard_groups.md.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <set>
#include <thread>

#include "shardwise/comm/mpi_process_group.hpp"
#include "shardwise/core/float_convert.hpp"
#include "shardwise/ddp/distributed_data_parallel.hpp"
#include "shardwise/layout/layout_algorithms.hpp"
#include "shardwise/layout/model_zoo.hpp"

namespace shardwise {
namespace {

ParamList tiny_model() {
  TransformerConfig c;
  c.name = "shard-group-test";
  c.num_layers = 8;
  c.hidden_size = 32;
  c.ffn_hidden_size = 48;
  c.num_attention_heads = 4;
  c.vocab_size = 80;
  c.dtype = DType::kBFloat16;
  c.num_experts = 4;  // expert layer-wise buffers get shard groups of the expert-DP group too
  c.moe_ffn_hidden_size = 16;
  return generate_transformer_params(c);
}

float read_param(const TensorView& v, std::int64_t i) {
  return bf16_to_float(v.as<bf16_bits>()[i]);
}

DistributedDataParallelConfig shard_group_config(int s) {
  DistributedDataParallelConfig config;
  config.overlap_grad_reduce = true;
  config.use_distributed_optimizer = true;
  config.bucket_size = 6000;
  config.layer_wise_shard_group_size = LayerWiseShardGroupSize::of(s);
  return config;
}

// Each rank's reduced shard of every buffer equals `reference` (one vector per buffer) within fp32
// rounding, and every replica of a shard holds the same bits (so every replica steps identically).
void expect_owned_shards_match(const DistributedDataParallel& ddp,
                               const std::vector<std::vector<float>>& reference) {
  for (std::size_t k = 0; k < ddp.buffers().size(); ++k) {
    const ParamAndGradBuffer& b = *ddp.buffers()[k];
    const int shard = ddp.group_for(b.key())->rank();
    const float* g = b.grad_data().as<float>();
    std::int64_t bad = 0;
    std::uint64_t checksum = 1469598103934665603ull;
    for (const Bucket& bucket : b.buckets()) {
      const BucketRange r = bucket.shard_range(shard);
      for (std::int64_t e = r.start; e < r.end; ++e) {
        const float want = reference[k][static_cast<std::size_t>(e)];
        if (std::abs(g[e] - want) > 1e-6f * std::max(1.0f, std::abs(want)) && ++bad <= 3) {
          ADD_FAILURE() << b.key().to_string() << " element " << e << ": " << g[e] << " vs "
                        << want;
        }
        std::uint32_t bits = 0;
        std::memcpy(&bits, &g[e], 4);
        checksum = (checksum ^ bits) * 1099511628211ull;
      }
    }
    EXPECT_EQ(bad, 0) << b.key().to_string();
    if (const ProcessGroupPtr& replica = ddp.replica_group_for(b.key())) {
      replica->check_same_on_all_ranks(checksum, "reduced shard of " + b.key().to_string());
    }
  }
}

class ShardGroupSync : public ::testing::Test {
 protected:
  void SetUp() override {
    if (dp < 2) GTEST_SKIP() << "needs at least 2 ranks";
    const LayoutOptions options = config.layout_options(LayoutAlgorithm::kLayerWise, dp);
    ddp = std::make_unique<DistributedDataParallel>(params,
                                                    compute_full_param_layout(params, options),
                                                    config, DataParallelGroups{world, nullptr});
  }
  void fill_random_grads(unsigned seed) {
    std::mt19937 rng(seed * 7919u + static_cast<unsigned>(world->rank()));
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (const auto& b : ddp->buffers()) {
      float* g = b->grad_data().as<float>();
      for (std::int64_t i = 0; i < b->numel(); ++i) g[i] = u(rng);
    }
  }
  void register_all_in_random_order(unsigned seed) {
    std::vector<ParamId> order(params.size());
    std::iota(order.begin(), order.end(), ParamId{0});
    std::mt19937 rng(seed + 31u * static_cast<unsigned>(world->rank()));
    std::shuffle(order.begin(), order.end(), rng);
    for (ParamId p : order) ddp->register_grad_ready(p);
  }

  ProcessGroupPtr world = init_mpi_world();
  int dp = world->size();
  int s = std::max(1, dp / 2);
  DistributedDataParallelConfig config = shard_group_config(s);
  ParamList params = tiny_model();
  std::unique_ptr<DistributedDataParallel> ddp;
};

TEST_F(ShardGroupSync, LayerWiseBuffersUseShardGroupsAndTheRestFullDp) {
  int layer_wise = 0, element_sharded = 0;
  for (const auto& b : ddp->buffers()) {
    const ProcessGroupPtr& group = ddp->group_for(b->key());
    const ProcessGroupPtr& replica = ddp->replica_group_for(b->key());
    if (b->key().is_layer_wise) {
      ++layer_wise;
      EXPECT_EQ(b->layout().num_shards, s);
      EXPECT_EQ(group->size(), s);
      EXPECT_EQ(group->rank(), world->rank() % s) << "consecutive shard groups";
      ASSERT_NE(replica, nullptr);
      EXPECT_EQ(replica->size(), dp / s);
      EXPECT_EQ(replica->rank(), world->rank() / s);
    } else {
      ++element_sharded;
      EXPECT_EQ(b->layout().num_shards, dp);
      EXPECT_EQ(group, world);
      EXPECT_EQ(replica, nullptr);
    }
  }
  EXPECT_GT(layer_wise, 0);
  EXPECT_GT(element_sharded, 0);
}

TEST_F(ShardGroupSync, ShardedReduceEqualsFullAllReduceAndReplicasAgreeBitwise) {
  for (unsigned iteration = 0; iteration < 2; ++iteration) {
    fill_random_grads(iteration);
    // Reference: the same grads, scaled by 1/dp as the buckets are, all-reduced over all ranks.
    std::vector<std::vector<float>> reference;
    for (const auto& b : ddp->buffers()) {
      const float* g = b->grad_data().as<float>();
      std::vector<float> copy(g, g + b->numel());
      for (float& x : copy) x *= static_cast<float>(1.0 / dp);
      world->all_reduce(TensorView{copy.data(), b->numel(), DType::kFloat32}, ReduceOp::kSum)
          ->wait();
      reference.push_back(std::move(copy));
    }
    register_all_in_random_order(iteration);
    ddp->finish_grad_sync();
    expect_owned_shards_match(*ddp, reference);
    ddp->zero_grad_buffer();
  }
}

// The replica all-reduces are issued by polling, without finish_grad_sync: they overlap with
// whatever the caller does after the reduce-scatters (backward, with overlap_grad_reduce).
TEST_F(ShardGroupSync, ReplicaAllReducesAreIssuedBeforeFinishGradSync) {
  fill_random_grads(9);
  register_all_in_random_order(9);
  const int groups = static_cast<int>(ddp->bucket_groups().size());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  int issued = 0;
  while ((issued = ddp->poll_grad_sync()) < groups && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(issued, groups);
  ddp->finish_grad_sync();
  EXPECT_EQ(ddp->poll_grad_sync(), 0) << "a new iteration starts with nothing issued";
}

TEST_F(ShardGroupSync, ParamGatherInTheShardGroupRebuildsEveryParam) {
  const auto value = [](ParamId p, std::int64_t i) {
    return static_cast<float>(static_cast<std::int64_t>(p * 31 + static_cast<ParamId>(i)) % 251) -
           100.0f;
  };
  // Every rank writes garbage everywhere, then the true values into its own shards only.
  for (const auto& b : ddp->buffers()) {
    bf16_bits* data = b->param_data().as<bf16_bits>();
    for (std::int64_t i = 0; i < b->numel(); ++i) data[i] = float_to_bf16(-7.0f);
    const int shard = ddp->group_for(b->key())->rank();
    for (const ParamRange& r : b->params()) {
      const BucketRange own = b->buckets()[static_cast<std::size_t>(r.bucket)].shard_range(shard);
      for (std::int64_t e = std::max(r.start, own.start); e < std::min(r.end, own.end); ++e) {
        data[e] = float_to_bf16(value(r.param, e - r.start));
      }
    }
  }
  ddp->start_param_sync();
  std::int64_t wrong = 0;
  for (ParamId p = 0; p < params.size(); ++p) {
    const TensorView v = ddp->param(p);
    for (std::int64_t i = 0; i < v.numel; ++i) wrong += read_param(v, i) != value(p, i) ? 1 : 0;
  }
  EXPECT_EQ(wrong, 0);
}

// The formula per layer-wise buffer of N elements (per bucket, as the counters round):
// (S-1)/S N g (reduce-scatter) + 2(R-1)/R (N/S) g (all-reduce across R = dp/S) + (S-1)/S N p
// (all-gather); element-sharded buffers move (dp-1)/dp N (g + p) in the DP group.
TEST_F(ShardGroupSync, BytesPerRankAreTheShardGroupFormula) {
  const std::int64_t S = s, R = dp / s, D = dp;
  std::int64_t layer_wise_bytes = 0, element_sharded_bytes = 0;
  std::set<ProcessGroup*> shard_and_replica_groups;
  for (const auto& b : ddp->buffers()) {
    const auto g = static_cast<std::int64_t>(dtype_size(b->key().grad_dtype));
    const auto p = static_cast<std::int64_t>(dtype_size(b->key().param_dtype));
    for (const Bucket& bucket : b->buckets()) {
      const std::int64_t n = bucket.numel();
      if (b->key().is_layer_wise) {
        layer_wise_bytes +=
            (S - 1) * n * g / S + 2 * (R - 1) * (n / S * g) / R + (S - 1) * n * p / S;
      } else {
        element_sharded_bytes += (D - 1) * n * g / D + (D - 1) * n * p / D;
      }
    }
    if (b->key().is_layer_wise) {
      shard_and_replica_groups.insert(ddp->group_for(b->key()).get());
      shard_and_replica_groups.insert(ddp->replica_group_for(b->key()).get());
    }
  }
  ASSERT_GT(layer_wise_bytes, 0);
  world->reset_traffic();
  for (ProcessGroup* group : shard_and_replica_groups) group->reset_traffic();
  fill_random_grads(5);
  register_all_in_random_order(5);
  ddp->finish_grad_sync();
  ddp->start_param_sync();
  std::int64_t shard_group_sent = 0, shard_group_received = 0;
  for (ProcessGroup* group : shard_and_replica_groups) {
    shard_group_sent += group->traffic().total_sent();
    shard_group_received += group->traffic().total_received();
  }
  EXPECT_EQ(shard_group_sent, layer_wise_bytes);
  EXPECT_EQ(shard_group_received, layer_wise_bytes);
  EXPECT_EQ(world->traffic().total_sent(), element_sharded_bytes);
}

// Expert parallelism 2 (np 4: expert-DP groups {0, 2} and {1, 3}, as Megatron lays them out
// with the EP ranks adjacent): expert layer-wise buffers use shard groups of gcd(S, expert dp)
// ranks inside the expert-DP group, and their reduced shards equal an all-reduce over the
// expert-DP group, the same bits on every replica. S = 1 gives expert shard groups of one rank
// with replicas across expert DP; S = 2 covers the whole expert-DP group (no replicas).
TEST(ExpertShardGroupSync, ExpertBuffersReduceInShardGroupsOfTheExpertDpGroup) {
  const ProcessGroupPtr world = init_mpi_world();
  const int dp = world->size();
  if (dp < 4 || dp % 2 != 0) GTEST_SKIP() << "needs an even number of ranks, at least 4";
  const int ep = 2, expert_dp = dp / ep;
  const ProcessGroupPtr expert_group =
      split_group(world, world->rank() % ep, world->rank(), "expert_dp");
  ASSERT_EQ(expert_group->size(), expert_dp);
  const ParamList params = tiny_model();
  for (int s : {1, 2}) {
    SCOPED_TRACE(::testing::Message() << "S = " << s);
    const DistributedDataParallelConfig config = shard_group_config(s);
    DistributedDataParallel ddp(
        params,
        compute_full_param_layout(
            params, config.layout_options(LayoutAlgorithm::kLayerWise, dp, expert_dp)),
        config, DataParallelGroups{world, expert_group});
    const int expert_shards = std::gcd(s, expert_dp);
    int expert_layer_wise = 0;
    std::mt19937 rng(11u + static_cast<unsigned>(world->rank()));
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<std::vector<float>> reference;
    for (const auto& b : ddp.buffers()) {
      const bool expert = b->key().is_expert_parallel;
      if (expert && b->key().is_layer_wise) {
        ++expert_layer_wise;
        EXPECT_EQ(b->layout().num_shards, expert_shards);
        EXPECT_EQ(ddp.group_for(b->key())->size(), expert_shards);
        const ProcessGroupPtr& replica = ddp.replica_group_for(b->key());
        if (expert_shards < expert_dp) {
          ASSERT_NE(replica, nullptr);
          EXPECT_EQ(replica->size(), expert_dp / expert_shards);
        } else {
          EXPECT_EQ(replica, nullptr);
        }
      }
      float* g = b->grad_data().as<float>();
      for (std::int64_t i = 0; i < b->numel(); ++i) g[i] = u(rng);
      // Reference: scaled by 1/dp as the buckets are, summed over the group the buffer uses.
      std::vector<float> copy(g, g + b->numel());
      for (float& x : copy) x *= static_cast<float>(1.0 / dp);
      (expert ? expert_group : world)
          ->all_reduce(TensorView{copy.data(), b->numel(), DType::kFloat32}, ReduceOp::kSum)
          ->wait();
      reference.push_back(std::move(copy));
    }
    EXPECT_GT(expert_layer_wise, 0);
    for (ParamId p = 0; p < params.size(); ++p) ddp.register_grad_ready(p);
    ddp.finish_grad_sync();
    expect_owned_shards_match(ddp, reference);
  }
}

}  // namespace
}  // namespace shardwise
