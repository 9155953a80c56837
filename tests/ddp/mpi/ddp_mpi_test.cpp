// Multi-rank DDP tests: buffers built from the real layout algorithms, grads registered in a
// different random order on every rank, results checked against reference means computed
// locally from the same deterministic per-rank values.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <numeric>
#include <random>
#include <sstream>

#include "shardwise/comm/mpi_process_group.hpp"
#include "shardwise/comm/parallel_layout.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/core/float_convert.hpp"
#include "shardwise/ddp/distributed_data_parallel.hpp"
#include "shardwise/layout/layout_algorithms.hpp"
#include "shardwise/layout/model_zoo.hpp"

namespace shardwise {
namespace {

ParamList tiny_model(DType dtype, int num_experts = 0) {
  TransformerConfig c;
  c.name = "ddp-test";
  c.num_layers = 8;  // enough matrices for several shard-aligned buckets at dp=4
  c.hidden_size = 32;
  c.ffn_hidden_size = 48;
  c.num_attention_heads = 4;
  c.vocab_size = 80;
  c.dtype = dtype;
  c.num_experts = num_experts;
  c.moe_ffn_hidden_size = 16;
  return generate_transformer_params(c);
}

float read(const TensorView& v, std::int64_t i) {
  switch (v.dtype) {
    case DType::kFloat32:
      return v.as<float>()[i];
    case DType::kBFloat16:
      return bf16_to_float(v.as<bf16_bits>()[i]);
    default:
      ADD_FAILURE() << "unexpected dtype";
      return 0.0f;
  }
}

void write(const TensorView& v, std::int64_t i, float x) {
  switch (v.dtype) {
    case DType::kFloat32:
      v.as<float>()[i] = x;
      return;
    case DType::kBFloat16:
      v.as<bf16_bits>()[i] = float_to_bf16(x);
      return;
    default:
      ADD_FAILURE() << "unexpected dtype";
  }
}

// Per-rank gradient values: quarter-integers small enough that every sum, 1/dp scaling and bf16
// rounding in this file is exact.
float grad_value(int rank, ParamId p, std::int64_t i, int micro = 0) {
  return 0.25f * static_cast<float>((rank + 1) * (1 + static_cast<int>(p % 3))) +
         static_cast<float>((i + micro) % 5);
}

// The value the owner of each element writes before the param all-gather (integers: exact).
float param_value(ParamId p, std::int64_t i) {
  return static_cast<float>(static_cast<std::int64_t>(p * 31 + static_cast<ParamId>(i)) % 251) -
         100.0f;
}

// Param at each element of a buffer (-1 for padding) and the element's index in that param.
struct ElementOwner {
  std::vector<std::int64_t> param;
  std::vector<std::int64_t> offset;
};
ElementOwner element_owners(const ParamAndGradBuffer& buffer) {
  ElementOwner o{std::vector<std::int64_t>(static_cast<std::size_t>(buffer.numel()), -1),
                 std::vector<std::int64_t>(static_cast<std::size_t>(buffer.numel()), 0)};
  for (const ParamRange& r : buffer.params()) {
    for (std::int64_t i = r.start; i < r.end; ++i) {
      o.param[static_cast<std::size_t>(i)] = static_cast<std::int64_t>(r.param);
      o.offset[static_cast<std::size_t>(i)] = i - r.start;
    }
  }
  return o;
}

std::vector<ParamId> shuffled_params(std::size_t n, unsigned seed) {
  std::vector<ParamId> order(n);
  std::iota(order.begin(), order.end(), ParamId{0});
  std::mt19937 rng(seed);
  std::shuffle(order.begin(), order.end(), rng);
  return order;
}

// Checks the reduced grads this rank holds: its shard of every bucket (reduce-scatter) or the
// whole buffer (all-reduce). expected(key, param, i) is the reference value.
template <typename Expected>
void expect_reduced_grads(const DistributedDataParallel& ddp, bool sharded, Expected expected) {
  for (const auto& buffer : ddp.buffers()) {
    const ElementOwner owners = element_owners(*buffer);
    const int shard = ddp.group_for(buffer->key())->rank();
    std::int64_t mismatches = 0;
    for (const Bucket& bucket : buffer->buckets()) {
      const BucketRange range = sharded ? bucket.shard_range(shard) : bucket.range;
      for (std::int64_t e = range.start; e < range.end; ++e) {
        const std::int64_t p = owners.param[static_cast<std::size_t>(e)];
        const float want = p < 0 ? 0.0f
                                 : expected(buffer->key(), static_cast<ParamId>(p),
                                            owners.offset[static_cast<std::size_t>(e)]);
        const float got = read(buffer->grad_data(), e);
        if (got != want && ++mismatches <= 5) {
          ADD_FAILURE() << "buffer " << buffer->key().to_string() << " element " << e << " (param "
                        << p << "): got " << got << ", want " << want;
        }
      }
    }
    EXPECT_EQ(mismatches, 0) << buffer->key().to_string();
  }
}

void fill_grads(DistributedDataParallel& ddp, int rank, int micro, bool accumulate) {
  for (ParamId p = 0; p < ddp.params().size(); ++p) {
    const TensorView g = ddp.main_grad(p);
    for (std::int64_t i = 0; i < g.numel; ++i) {
      write(g, i, (accumulate ? read(g, i) : 0.0f) + grad_value(rank, p, i, micro));
    }
  }
}

std::int64_t dense_bucket_count(const DistributedDataParallel& ddp) {
  std::int64_t n = 0;
  for (const auto& b : ddp.buffers()) {
    if (!b->key().is_expert_parallel) n += static_cast<std::int64_t>(b->buckets().size());
  }
  return n;
}

struct Variant {
  const char* name;
  LayoutAlgorithm algorithm;
  DType dtype;
  bool grad_reduce_in_fp32;
};

class GradSync : public ::testing::TestWithParam<Variant> {};

TEST_P(GradSync, RandomReadyOrderReducesEachBucketOnceIntoTheRightShard) {
  const Variant v = GetParam();
  ProcessGroupPtr world = init_mpi_world();
  const int dp = world->size();
  const int me = world->rank();
  DistributedDataParallelConfig config;
  config.overlap_grad_reduce = true;
  config.use_distributed_optimizer = true;
  config.grad_reduce_in_fp32 = v.grad_reduce_in_fp32;
  config.bucket_size = 6000;
  const ParamList params = tiny_model(v.dtype);
  const FullParamLayout layout =
      compute_full_param_layout(params, config.layout_options(v.algorithm, dp));
  DistributedDataParallel ddp(params, layout, config, {world, nullptr});
  ASSERT_GT(ddp.bucket_groups().size(), 2u) << "the test needs several bucket groups";
  if (!v.grad_reduce_in_fp32) {
    for (const auto& b : ddp.buffers()) EXPECT_EQ(b->key().grad_dtype, v.dtype);
  }

  for (int iteration = 0; iteration < 2; ++iteration) {
    world->reset_traffic();
    fill_grads(ddp, me, 0, /*accumulate=*/false);
    for (ParamId p : shuffled_params(params.size(), 1000u * static_cast<unsigned>(me) + 17u +
                                                        static_cast<unsigned>(iteration))) {
      ddp.register_grad_ready(p);
    }
    // Every group became complete during registration: all were dispatched, in index order.
    std::vector<int> expected_log(ddp.bucket_groups().size());
    std::iota(expected_log.begin(), expected_log.end(), 0);
    EXPECT_EQ(ddp.grad_dispatch_log(), expected_log);
    ddp.finish_grad_sync();
    const TrafficCounters t = world->traffic();
    EXPECT_EQ(t.calls.at(CollectiveKind::kReduceScatter), dense_bucket_count(ddp));
    EXPECT_EQ(t.calls.at(CollectiveKind::kAllReduce), 0);

    expect_reduced_grads(ddp, /*sharded=*/true, [&](const BufferKey&, ParamId p, std::int64_t i) {
      double sum = 0.0;
      for (int r = 0; r < dp; ++r) sum += grad_value(r, p, i) / static_cast<double>(dp);
      return static_cast<float>(sum);
    });
    ddp.zero_grad_buffer();
  }
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, GradSync,
    ::testing::Values(
        Variant{"LayerWiseFp32Grads", LayoutAlgorithm::kLayerWise, DType::kBFloat16, true},
        Variant{"DistOptFp32Grads", LayoutAlgorithm::kDistributed, DType::kBFloat16, true},
        Variant{"LayerWiseBf16Grads", LayoutAlgorithm::kLayerWise, DType::kBFloat16, false},
        Variant{"DistOptBf16Grads", LayoutAlgorithm::kDistributed, DType::kBFloat16, false}),
    [](const ::testing::TestParamInfo<Variant>& info) { return std::string(info.param.name); });

TEST(GradSync, AllReduceWithoutDistributedOptimizer) {
  ProcessGroupPtr world = init_mpi_world();
  const int dp = world->size();
  DistributedDataParallelConfig config;  // plain DDP, no overlap: one group, all-reduce
  const ParamList params = tiny_model(DType::kFloat32);
  DistributedDataParallel ddp(
      params,
      compute_full_param_layout(params, config.layout_options(LayoutAlgorithm::kDefault, dp)),
      config, {world, nullptr});
  fill_grads(ddp, world->rank(), 0, false);
  ddp.finish_grad_sync();
  expect_reduced_grads(ddp, /*sharded=*/false, [&](const BufferKey&, ParamId p, std::int64_t i) {
    double sum = 0.0;
    for (int r = 0; r < dp; ++r) sum += grad_value(r, p, i);
    return static_cast<float>(sum / dp);
  });
}

// An all-reduced buffer has no per-rank shards: asking for this rank's shard was an internal
// invariant failure; it is an InvalidArgument saying why.
TEST(GradSync, AllReducedBucketsHaveNoLocalShard) {
  ProcessGroupPtr world = init_mpi_world();
  if (world->size() == 1) GTEST_SKIP() << "at dp 1 the one shard is the whole bucket";
  DistributedDataParallelConfig config;
  const ParamList params = tiny_model(DType::kFloat32);
  DistributedDataParallel ddp(
      params,
      compute_full_param_layout(params,
                                config.layout_options(LayoutAlgorithm::kDefault, world->size())),
      config, {world, nullptr});
  const BufferKey key = ddp.buffers().front()->key();
  try {
    ddp.local_shard_range(key, 0);
    ADD_FAILURE() << "an all-reduced bucket gave a local shard";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("all-reduced"), std::string::npos) << e.what();
  }
}

TEST(GradSync, AccumulationOverThreeMicrobatchesSyncsOnlyTheLast) {
  ProcessGroupPtr world = init_mpi_world();
  const int dp = world->size();
  const int me = world->rank();
  DistributedDataParallelConfig config;
  config.overlap_grad_reduce = true;
  config.use_distributed_optimizer = true;
  config.bucket_size = 6000;
  const ParamList params = tiny_model(DType::kBFloat16);
  DistributedDataParallel ddp(
      params,
      compute_full_param_layout(params, config.layout_options(LayoutAlgorithm::kLayerWise, dp)),
      config, {world, nullptr});
  world->reset_traffic();
  for (int micro = 0; micro < 3; ++micro) {
    const bool last = micro == 2;
    ddp.set_is_last_microbatch(last);
    fill_grads(ddp, me, micro, /*accumulate=*/true);
    for (ParamId p : shuffled_params(params.size(), 77u * static_cast<unsigned>(me + micro))) {
      ddp.register_grad_ready(p);
    }
    if (!last) {
      EXPECT_EQ(world->traffic().total_sent(), 0) << "micro-batch " << micro;
    }
  }
  ddp.finish_grad_sync();
  EXPECT_EQ(world->traffic().calls.at(CollectiveKind::kReduceScatter), dense_bucket_count(ddp));
  expect_reduced_grads(ddp, /*sharded=*/true, [&](const BufferKey&, ParamId p, std::int64_t i) {
    double sum = 0.0;
    for (int r = 0; r < dp; ++r) {
      for (int m = 0; m < 3; ++m) sum += grad_value(r, p, i, m);
    }
    return static_cast<float>(sum / dp);
  });
}

// Each rank writes its own shard of every bucket; after the gather every param is whole.
void write_own_shards(DistributedDataParallel& ddp) {
  for (const auto& buffer : ddp.buffers()) {
    const ElementOwner owners = element_owners(*buffer);
    const int shard = ddp.group_for(buffer->key())->rank();
    for (std::int64_t e = 0; e < buffer->numel(); ++e) write(buffer->param_data(), e, -7.0f);
    for (const Bucket& bucket : buffer->buckets()) {
      const BucketRange range = bucket.shard_range(shard);
      for (std::int64_t e = range.start; e < range.end; ++e) {
        const std::int64_t p = owners.param[static_cast<std::size_t>(e)];
        if (p >= 0) {
          write(buffer->param_data(), e,
                param_value(static_cast<ParamId>(p), owners.offset[static_cast<std::size_t>(e)]));
        }
      }
    }
  }
}

std::int64_t wrong_param_elements(const DistributedDataParallel& ddp,
                                  const std::vector<ParamId>& which) {
  std::int64_t wrong = 0;
  for (ParamId p : which) {
    const TensorView v = ddp.param(p);
    for (std::int64_t i = 0; i < v.numel; ++i) wrong += read(v, i) != param_value(p, i);
  }
  return wrong;
}

std::vector<ParamId> all_ids(const DistributedDataParallel& ddp) {
  std::vector<ParamId> ids(ddp.params().size());
  std::iota(ids.begin(), ids.end(), ParamId{0});
  return ids;
}

TEST(ParamSync, AllGatherReconstructsEveryParam) {
  ProcessGroupPtr world = init_mpi_world();
  for (LayoutAlgorithm algorithm : {LayoutAlgorithm::kLayerWise, LayoutAlgorithm::kDistributed}) {
    DistributedDataParallelConfig config;
    config.use_distributed_optimizer = true;
    config.bucket_size = 5000;
    const ParamList params = tiny_model(DType::kBFloat16);
    DistributedDataParallel ddp(
        params, compute_full_param_layout(params, config.layout_options(algorithm, world->size())),
        config, {world, nullptr});
    write_own_shards(ddp);
    ddp.start_param_sync();
    EXPECT_EQ(wrong_param_elements(ddp, all_ids(ddp)), 0);
  }
}

TEST(ParamSync, OverlappedGatherIsCompleteForEachGroupTheForwardPassWaitsOn) {
  ProcessGroupPtr world = init_mpi_world();
  DistributedDataParallelConfig config;
  config.use_distributed_optimizer = true;
  config.overlap_grad_reduce = true;
  config.overlap_param_gather = true;
  config.bucket_size = 4000;
  const ParamList params = tiny_model(DType::kBFloat16);
  DistributedDataParallel ddp(
      params,
      compute_full_param_layout(params,
                                config.layout_options(LayoutAlgorithm::kLayerWise, world->size())),
      config, {world, nullptr});
  ASSERT_GT(ddp.bucket_groups().size(), 2u);
  for (int iteration = 0; iteration < 2; ++iteration) {
    write_own_shards(ddp);
    ddp.start_param_sync();
    for (int g = static_cast<int>(ddp.bucket_groups().size()) - 1; g >= 0; --g) {
      ddp.finish_param_sync(g);
      EXPECT_EQ(
          wrong_param_elements(ddp, ddp.bucket_groups()[static_cast<std::size_t>(g)]->params()), 0)
          << "group " << g;
    }
  }
  // Only the layer-wise buffers: the other buffers keep their stale contents.
  write_own_shards(ddp);
  ddp.start_param_sync_for_bucket_groups([](const BucketGroup& g) { return g.key().is_layer_wise; },
                                         /*force_sync=*/true);
  for (const auto& group : ddp.bucket_groups()) {
    const std::int64_t wrong = wrong_param_elements(ddp, group->params());
    if (group->key().is_layer_wise) {
      EXPECT_EQ(wrong, 0);
    } else if (world->size() > 1) {
      EXPECT_GT(wrong, 0);
    }
  }
}

TEST(ExpertParallel, ExpertBuffersReduceAndGatherOverTheExpertDataParallelGroup) {
  ProcessGroupPtr world = init_mpi_world();
  if (world->size() % 2 != 0) GTEST_SKIP() << "needs an even world for ep=2";
  const ParallelGroups groups = make_parallel_groups(world, ParallelSizes{1, 1, 0, 2, 0});
  const int dp = groups.data_parallel->size();
  const int edp = groups.expert_data_parallel->size();
  ASSERT_EQ(edp * 2, dp);
  const std::vector<int> expert_members =
      parallel_group_members(groups.sizes, ParallelDim::kExpertData, world->rank());
  ASSERT_EQ(static_cast<int>(expert_members.size()), edp);

  DistributedDataParallelConfig config;
  config.use_distributed_optimizer = true;
  config.overlap_grad_reduce = true;
  config.bucket_size = 6000;
  const ParamList params = tiny_model(DType::kBFloat16, /*num_experts=*/4);
  const FullParamLayout layout = compute_full_param_layout(
      params, config.layout_options(LayoutAlgorithm::kLayerWise, dp, edp));
  DistributedDataParallel ddp(params, layout, config, DataParallelGroups::from(groups));
  bool has_expert = false;
  for (const auto& b : ddp.buffers()) {
    if (b->key().is_expert_parallel) {
      has_expert = true;
      EXPECT_EQ(b->layout().num_shards, edp);
      EXPECT_EQ(ddp.group_for(b->key()), groups.expert_data_parallel);
      EXPECT_DOUBLE_EQ(b->buckets()[0].gradient_scaling_factor, 1.0 / dp);
    }
  }
  ASSERT_TRUE(has_expert);

  fill_grads(ddp, world->rank(), 0, false);
  for (ParamId p : shuffled_params(params.size(), 31u * static_cast<unsigned>(world->rank()))) {
    ddp.register_grad_ready(p);
  }
  ddp.finish_grad_sync();
  expect_reduced_grads(ddp, /*sharded=*/true, [&](const BufferKey& key, ParamId p, std::int64_t i) {
    // Expert grads: 1/dp-scaled sum over the expert-DP group only (Megatron's semantics).
    double sum = 0.0;
    if (key.is_expert_parallel) {
      for (int r : expert_members) sum += grad_value(r, p, i) / static_cast<double>(dp);
    } else {
      for (int r = 0; r < dp; ++r) sum += grad_value(r, p, i) / static_cast<double>(dp);
    }
    return static_cast<float>(sum);
  });

  write_own_shards(ddp);
  ddp.start_param_sync();
  EXPECT_EQ(wrong_param_elements(ddp, all_ids(ddp)), 0);
}

TEST(LayoutAgreement, MismatchOnOneRankThrowsCommErrorEverywhere) {
  ProcessGroupPtr world = init_mpi_world();
  if (world->size() < 2) GTEST_SKIP() << "needs two ranks";
  DistributedDataParallelConfig config;
  config.use_distributed_optimizer = true;
  ParamList params = tiny_model(DType::kBFloat16);
  LayoutOptions options = config.layout_options(LayoutAlgorithm::kLayerWise, world->size());
  const bool odd_one = world->rank() == world->size() - 1;
  if (odd_one) params.back().name += ".renamed";  // same shapes, different model on one rank
  const FullParamLayout layout = compute_full_param_layout(params, options);
  try {
    DistributedDataParallel ddp(params, layout, config, {world, nullptr});
    ADD_FAILURE() << "a mismatched layout was accepted";
  } catch (const CommError& e) {
    // Named by the param, with this rank's view of it (it read as two layout hashes).
    const std::string expected =
        str_cat("disagree on param ", params.size() - 1, " (here '", params.back().name, "' [");
    EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
  }
  // A renamed param (same offsets) is caught too, and the group is still usable afterwards.
  if (odd_one) params[3].name += ".renamed";
  const FullParamLayout same_offsets =
      compute_full_param_layout(tiny_model(DType::kBFloat16),
                                config.layout_options(LayoutAlgorithm::kLayerWise, world->size()));
  EXPECT_THROW(DistributedDataParallel(params, same_offsets, config, {world, nullptr}), CommError);
  EXPECT_NO_THROW(DistributedDataParallel(tiny_model(DType::kBFloat16), same_offsets, config,
                                          {world, nullptr}));
}

// Ring-model bytes one rank moves for each path, from the formulas of process_group.hpp.
TEST(Traffic, ReduceScatterPathAndLegacyPathMoveTheirFormulaVolumes) {
  ProcessGroupPtr world = init_mpi_world();
  const std::int64_t p = world->size();
  const int me = world->rank();
  const ParamList params = tiny_model(DType::kFloat32);

  DistributedDataParallelConfig rs_config;
  rs_config.use_distributed_optimizer = true;
  rs_config.overlap_grad_reduce = true;
  rs_config.bucket_size = 6000;
  const FullParamLayout layout = compute_full_param_layout(
      params, rs_config.layout_options(LayoutAlgorithm::kLayerWise, static_cast<int>(p)));

  std::int64_t rs_bytes = 0, ag_bytes = 0, ar_bytes = 0, buckets = 0;
  for (const auto& [key, l] : layout.layouts) {
    for (const BucketRange& b : l.bucket_indices) {
      const std::int64_t gbytes = b.numel() * static_cast<std::int64_t>(dtype_size(key.grad_dtype));
      const std::int64_t pbytes =
          b.numel() * static_cast<std::int64_t>(dtype_size(key.param_dtype));
      rs_bytes += (p - 1) * gbytes / p;
      ag_bytes += (p - 1) * pbytes / p;
      ar_bytes += 2 * (p - 1) * gbytes / p;
      ++buckets;
    }
  }
  {
    DistributedDataParallel ddp(params, layout, rs_config, {world, nullptr});
    world->reset_traffic();
    fill_grads(ddp, me, 0, false);
    for (ParamId id = params.size(); id-- > 0;) ddp.register_grad_ready(id);
    ddp.finish_grad_sync();
    ddp.start_param_sync();
    const TrafficCounters t = world->traffic();
    EXPECT_EQ(t.bytes_sent.at(CollectiveKind::kReduceScatter), rs_bytes);
    EXPECT_EQ(t.bytes_sent.at(CollectiveKind::kAllGather), ag_bytes);
    EXPECT_EQ(t.total_sent(), rs_bytes + ag_bytes);
    EXPECT_EQ(t.total_received(), rs_bytes + ag_bytes);
    EXPECT_EQ(t.calls.at(CollectiveKind::kReduceScatter), buckets);
    EXPECT_EQ(t.calls.at(CollectiveKind::kAllGather), buckets);
  }
  {
    DistributedDataParallelConfig legacy = rs_config;
    legacy.use_distributed_optimizer = false;
    legacy.use_legacy_param_sync = true;
    DistributedDataParallel ddp(params, layout, legacy, {world, nullptr});
    // Owners: the seed's ping-pong assignment over all params.
    const std::map<ParamId, int> owner =
        ping_pong_owner_map(params, layout, static_cast<int>(p), static_cast<int>(p));
    ASSERT_EQ(owner.size(), params.size());
    // all_gather_v per buffer: this rank sends its owned bytes to p-1 peers, receives the rest.
    std::int64_t agv_sent = 0, agv_received = 0;
    for (const auto& [key, l] : layout.layouts) {
      std::int64_t own = 0, total = 0;
      for (const ParamRange& r : l.param_index_map) {
        const std::int64_t bytes =
            r.numel() * static_cast<std::int64_t>(dtype_size(key.param_dtype));
        total += bytes;
        if (owner.at(r.param) == me) own += bytes;
      }
      agv_sent += own * (p - 1);
      agv_received += total - own;
    }
    world->reset_traffic();
    fill_grads(ddp, me, 0, false);
    for (ParamId id = params.size(); id-- > 0;) ddp.register_grad_ready(id);
    ddp.finish_grad_sync();
    write_own_shards(ddp);  // fills every param with -7, then own shards; owners re-write below
    for (ParamId id = 0; id < params.size(); ++id) {
      if (owner.at(id) != me) continue;
      const TensorView v = ddp.param(id);
      for (std::int64_t i = 0; i < v.numel; ++i) write(v, i, param_value(id, i));
    }
    ddp.legacy_param_sync(owner);
    EXPECT_EQ(wrong_param_elements(ddp, all_ids(ddp)), 0);
    const TrafficCounters t = world->traffic();
    EXPECT_EQ(t.bytes_sent.at(CollectiveKind::kAllReduce), ar_bytes);
    EXPECT_EQ(t.bytes_sent.at(CollectiveKind::kAllGatherV), agv_sent);
    EXPECT_EQ(t.bytes_received.at(CollectiveKind::kAllGatherV), agv_received);
    EXPECT_EQ(t.total_sent(), ar_bytes + agv_sent);
    EXPECT_EQ(t.calls.at(CollectiveKind::kAllReduce), buckets);
    // Every rank holds the full reduced gradient on this path.
    expect_reduced_grads(ddp, /*sharded=*/false, [&](const BufferKey&, ParamId id, std::int64_t i) {
      double sum = 0.0;
      for (int r = 0; r < p; ++r) sum += grad_value(r, id, i) / static_cast<double>(p);
      return static_cast<float>(sum);
    });
  }
}

// Whether `address` lies in this process's mapping of one of shardwise's shared-memory segments
// (/proc/self/maps names the segment, "(deleted)" since it is unlinked at once).
bool in_shared_segment(const void* address) {
  const auto wanted = reinterpret_cast<std::uintptr_t>(address);
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    std::uintptr_t lo = 0;
    std::uintptr_t hi = 0;
    char dash = 0;
    std::istringstream in(line);
    in >> std::hex >> lo >> dash >> hi;
    if (wanted >= lo && wanted < hi) return line.find("/shardwise-") != std::string::npos;
  }
  return false;
}

TEST(SymmetricBuffers, HostBuffersAreSharedAndSyncAsPrivateOnesBitForBit) {
  ProcessGroupPtr world = init_mpi_world();
  const int dp = world->size();
  const int me = world->rank();
  DistributedDataParallelConfig config;
  config.use_distributed_optimizer = true;
  config.overlap_grad_reduce = true;
  config.grad_reduce_in_fp32 = true;  // fp32 grads reduce in place; bf16 ones through fp32 staging
  config.bucket_size = 6000;
  DistributedDataParallelConfig private_config = config;
  private_config.symmetric_buffers = false;
  const ParamList params = tiny_model(DType::kBFloat16);
  const FullParamLayout layout =
      compute_full_param_layout(params, config.layout_options(LayoutAlgorithm::kLayerWise, dp));
  DistributedDataParallel shared(params, layout, config, {world, nullptr});
  DistributedDataParallel own(params, layout, private_config, {world, nullptr});
  for (DistributedDataParallel* ddp : {&shared, &own}) {
    for (const auto& buffer : ddp->buffers()) {
      ASSERT_EQ(buffer->grad_data().dtype, DType::kFloat32);
      EXPECT_EQ(in_shared_segment(buffer->grad_data().data), ddp == &shared);
      EXPECT_EQ(in_shared_segment(buffer->param_data().data), ddp == &shared);
    }
    // Grads of mixed magnitudes: any other summation order would round differently.
    for (ParamId p = 0; p < params.size(); ++p) {
      const TensorView g = ddp->main_grad(p);
      for (std::int64_t i = 0; i < g.numel; ++i) {
        write(g, i,
              std::sin(0.37f * static_cast<float>(i + 101 * p) + 1.3f * me) *
                  std::pow(10.0f, static_cast<float>((i + me + p) % 7) - 3.0f));
      }
      ddp->register_grad_ready(p);
    }
    ddp->finish_grad_sync();
    write_own_shards(*ddp);
    ddp->start_param_sync();
  }
  for (std::size_t b = 0; b < shared.buffers().size(); ++b) {
    const ParamAndGradBuffer& a = *shared.buffers()[b];
    const ParamAndGradBuffer& c = *own.buffers()[b];
    const int shard = shared.group_for(a.key())->rank();
    for (const Bucket& bucket : a.buckets()) {
      const BucketRange r = bucket.shard_range(shard);
      const std::size_t bytes = static_cast<std::size_t>(r.end - r.start) * 4;
      EXPECT_EQ(std::memcmp(a.grad_data().as<float>() + r.start,
                            c.grad_data().as<float>() + r.start, bytes),
                0)
          << "reduced grads of bucket " << bucket.index;
    }
    EXPECT_EQ(std::memcmp(a.param_data().data, c.param_data().data, a.param_data().nbytes()), 0)
        << "gathered params of buffer " << a.key().to_string();
  }
}

}  // namespace
}  // namespace shardwise
