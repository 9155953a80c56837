// The layer-wise optimizer over shard groups (S = dp/2): owners are shard-group ranks, so every
// param is stepped by one rank of each shard group; the grad norm and zero count count each
// element once (the first replica's copy); the legacy path refuses S < dp.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "shardwise/comm/mpi_process_group.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/layout/shard_group_choice.hpp"
#include "shardwise/optim/chained_optimizer.hpp"
#include "shardwise/optim/data_parallel_setup.hpp"
#include "shardwise/optim/layer_wise_distributed_optimizer.hpp"

namespace shardwise::optim {
namespace {

ParamList small_model() {
  ParamList params;
  auto add = [&](const std::string& name, std::vector<std::int64_t> shape) {
    ParamInfo p;
    p.name = name;
    p.embedding_or_output = name == "embedding.weight";
    p.shape = std::move(shape);
    p.dtype = DType::kFloat32;
    params.push_back(std::move(p));
  };
  add("embedding.weight", {40, 16});
  for (int l = 0; l < 6; ++l) {
    add(str_cat("layers.", l, ".fc1.weight"), {32, 16});
    add(str_cat("layers.", l, ".fc2.weight"), {16, 32});
    add(str_cat("layers.", l, ".norm.weight"), {16});
  }
  return params;
}

// Per-rank grads: every fourth element sums to exactly zero over the ranks, the rest to
// quarter-integers (exact in fp32 after the 1/dp scaling for dp in {2, 4}).
float grad_value(int rank, int dp, ParamId p, std::int64_t i) {
  if (i % 4 == 0) return static_cast<float>(rank - (dp - 1) / 2.0);  // sums to 0 for even dp
  return 0.25f * static_cast<float>((rank + 1) * (1 + static_cast<int>(p % 3))) +
         static_cast<float>(i % 5);
}

struct ShardGroupRun {
  ProcessGroupPtr world = init_mpi_world();
  int dp = world->size();
  int s = std::max(1, dp / 2);
  std::vector<std::unique_ptr<DistributedDataParallel>> ddps;
  std::unique_ptr<Optimizer> optimizer;
  const LayerWiseDistributedOptimizer* layer_wise = nullptr;

  ShardGroupRun() {
    DistributedDataParallelConfig config;
    config.overlap_grad_reduce = true;
    config.bucket_size = 1500;
    config.layer_wise_shard_group_size = LayerWiseShardGroupSize::of(s);
    ddps = wrap_with_ddp({small_model()}, OptimizerKind::kLayerWise, config,
                         DataParallelGroups{world, nullptr});
    optimizer = make_optimizer(OptimizerKind::kLayerWise, {ddps[0].get()}, MuonOptions{},
                               AdamWOptions{}, world);
    const auto& chained = dynamic_cast<const ChainedOptimizer&>(*optimizer);
    layer_wise = dynamic_cast<const LayerWiseDistributedOptimizer*>(chained.children()[0].get());
  }
};

TEST(ShardGroupOptimizer, EachShardGroupOwnsEveryLayerWiseParamOnceAndOnlyReplicaZeroCounts) {
  ShardGroupRun t;
  if (t.dp < 2) GTEST_SKIP() << "needs at least 2 ranks";
  ASSERT_NE(t.layer_wise, nullptr);
  EXPECT_EQ(t.layer_wise->replicas(), t.dp / t.s);
  const DistributedDataParallel& ddp = *t.ddps[0];
  const ParamList& params = ddp.params();
  // owned[p] summed over all ranks: one owner per shard group = dp/S.
  std::vector<float> owned(params.size(), 0.0f);
  for (const OwnedSlice& slice : t.layer_wise->owned_params()) {
    owned[slice.param] += 1.0f;
    EXPECT_EQ(t.layer_wise->is_replica_copy(slice.name), t.world->rank() / t.s != 0) << slice.name;
  }
  t.world
      ->all_reduce(
          TensorView{owned.data(), static_cast<std::int64_t>(owned.size()), DType::kFloat32},
          ReduceOp::kSum)
      ->wait();
  int layer_wise_params = 0;
  for (const auto& [id, owner] : t.layer_wise->owners()) {
    ++layer_wise_params;
    EXPECT_EQ(owned[id], static_cast<float>(t.dp / t.s)) << params[id].name;
    EXPECT_LT(owner, t.s) << params[id].name << ": owners are shard-group ranks";
  }
  EXPECT_GT(layer_wise_params, 6);
}

TEST(ShardGroupOptimizer, GradNormAndZeroCountCountEachElementOnce) {
  ShardGroupRun t;
  if (t.dp < 2) GTEST_SKIP() << "needs at least 2 ranks";
  DistributedDataParallel& ddp = *t.ddps[0];
  const ParamList& params = ddp.params();
  double want_sq = 0;
  std::int64_t want_zeros = 0;
  for (ParamId p = 0; p < params.size(); ++p) {
    const TensorView g = ddp.main_grad(p);
    for (std::int64_t i = 0; i < g.numel; ++i) {
      g.as<float>()[i] = grad_value(t.world->rank(), t.dp, p, i);
      double mean = 0;
      for (int r = 0; r < t.dp; ++r) mean += grad_value(r, t.dp, p, i) / t.dp;
      want_sq += mean * mean;
      want_zeros += mean == 0.0 ? 1 : 0;
    }
  }
  for (ParamId p = params.size(); p-- > 0;) ddp.register_grad_ready(p);
  ddp.finish_grad_sync();
  EXPECT_NEAR(t.optimizer->get_grad_norm(), std::sqrt(want_sq), 1e-6 * std::sqrt(want_sq));
  EXPECT_EQ(t.optimizer->count_zeros(), want_zeros);
}

TEST(ShardGroupOptimizer, AutoLaysTheLayerWiseBuffersOutForTheCostModelsChoice) {
  const ProcessGroupPtr world = init_mpi_world();
  DistributedDataParallelConfig config;
  config.bucket_size = 1500;
  config.layer_wise_shard_group_size = LayerWiseShardGroupSize::automatic();
  const auto ddps = wrap_with_ddp({small_model()}, OptimizerKind::kLayerWise, config,
                                  DataParallelGroups{world, nullptr});
  LayoutOptions options = config.layout_options(LayoutAlgorithm::kLayerWise, world->size());
  const int chosen = choose_shard_group_size(small_model(), options).shard_group_size;
  int layer_wise = 0;
  for (const auto& b : ddps[0]->buffers()) {
    if (!b->key().is_layer_wise) continue;
    ++layer_wise;
    EXPECT_EQ(b->layout().num_shards, chosen);
    EXPECT_EQ(ddps[0]->group_for(b->key())->size(), chosen);
  }
  EXPECT_GT(layer_wise, 0);
}

TEST(ShardGroupOptimizer, LegacyLayerWisePathRefusesShardGroupsSmallerThanDp) {
  const ProcessGroupPtr world = init_mpi_world();
  if (world->size() < 2) GTEST_SKIP() << "needs at least 2 ranks";
  DistributedDataParallelConfig config;
  config.layer_wise_shard_group_size = LayerWiseShardGroupSize::of(world->size() / 2);
  try {
    wrap_with_ddp({small_model()}, OptimizerKind::kLegacyLayerWise, config,
                  DataParallelGroups{world, nullptr});
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("legacy layer-wise path"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace shardwise::optim
