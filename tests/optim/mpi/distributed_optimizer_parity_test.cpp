// The distributed optimizers against the single-process ones: with the same (averaged) gradients,
// LayerWise (Muon + AdamW hybrid), Distributed (ZeRO-1 AdamW) and the legacy layer-wise path
// must leave every rank with the parameters a single process computes, and report the same grad
// norm and zero count.
//
// Gradients are dyadic rationals (k / 1024) and the per-rank perturbations cancel exactly, so the
// reduced gradient equals the reference gradient bit for bit. The only remaining difference is the
// summation order of the global grad norm (per-rank partial sums vs one pass), which moves the
// clipping coefficient in the last bits; hence a 1e-6 tolerance on parameters (observed
// differences are a few ulps).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <set>

#include "shardwise/comm/mpi_process_group.hpp"
#include "shardwise/optim/chained_optimizer.hpp"
#include "shardwise/optim/data_parallel_setup.hpp"
#include "shardwise/optim/layer_wise_distributed_optimizer.hpp"

namespace shardwise::optim {
namespace {

ParamInfo param(std::string name, std::vector<std::int64_t> shape) {
  ParamInfo p;
  p.name = std::move(name);
  p.shape = std::move(shape);
  p.dtype = DType::kFloat32;
  return p;
}

ParamList test_model() {
  ParamList params;
  params.push_back(param("embedding.weight", {40, 32}));
  params.back().embedding_or_output = true;
  params.back().shared_embedding = true;
  for (int l = 0; l < 3; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    params.push_back(param(p + "norm.weight", {32}));
    params.push_back(param(p + "qkv.weight", {96, 32}));
    params.back().qkv_split = {32, 32, 32};
    params.push_back(param(p + "qkv.bias", {96}));
    params.push_back(param(p + "proj.weight", {32, 32}));
    params.push_back(param(p + "fc1.weight", {64, 32}));
    params.push_back(param(p + "fc2.weight", {32, 64}));
  }
  params.push_back(param("final_norm.weight", {32}));
  return params;
}

// Deterministic dyadic values in [-0.5, 0.5], with every 7th element exactly zero.
float dyadic(std::uint64_t seed, std::int64_t i) {
  std::uint64_t x =
      seed * 0x9e3779b97f4a7c15ull + static_cast<std::uint64_t>(i) * 0xbf58476d1ce4e5b9ull;
  x ^= x >> 29;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 32;
  if (i % 7 == 3) return 0.0f;
  return static_cast<float>(static_cast<std::int64_t>(x % 1025) - 512) / 1024.0f;
}

MuonOptions muon_options() {
  MuonOptions m;
  m.lr = 0.01;
  m.weight_decay = 0.1;
  m.nesterov = true;
  return m;
}

AdamWOptions adamw_options() {
  AdamWOptions a;
  a.lr = 0.01;
  a.weight_decay = 0.1;
  return a;
}

struct Reference {
  std::vector<std::vector<float>> values, grads;
  std::unique_ptr<Optimizer> optimizer;
};

Reference make_reference(const ParamList& params, OptimizerKind mode) {
  Reference ref;
  for (const auto& p : params) {
    ref.values.emplace_back(p.numel());
    ref.grads.emplace_back(p.numel());
  }
  std::vector<OptimParam> muon_params, adam_params;
  for (ParamId id = 0; id < params.size(); ++id) {
    OptimParam op{params[id].name, params[id].shape, ref.values[id].data(), ref.grads[id].data(),
                  params[id].qkv_split};
    const bool muon =
        mode != OptimizerKind::kDistributed && is_managed_by_layer_wise_optimizer(params[id]);
    (muon ? muon_params : adam_params).push_back(std::move(op));
  }
  std::vector<std::unique_ptr<Optimizer>> children;
  children.push_back(std::make_unique<Muon>(single_group(std::move(muon_params)), muon_options()));
  children.push_back(
      std::make_unique<AdamW>(single_group(std::move(adam_params)), adamw_options()));
  ref.optimizer = std::make_unique<ChainedOptimizer>(std::move(children));
  return ref;
}

class DistributedOptimizerParity : public testing::TestWithParam<OptimizerKind> {};

TEST_P(DistributedOptimizerParity, MatchesSingleProcessOptimizer) {
  const ProcessGroupPtr world = init_mpi_world();
  const ParallelGroups groups = make_parallel_groups(world, ParallelSizes{});
  const int p = world->size(), rank = world->rank();
  const ParamList params = test_model();
  const OptimizerKind mode = GetParam();

  DistributedDataParallelConfig config;
  config.overlap_grad_reduce = true;
  config.bucket_size = 3000;
  auto ddps = wrap_with_ddp({params}, mode, config, DataParallelGroups::from(groups));
  DistributedDataParallel& ddp = *ddps.front();
  Reference ref = make_reference(params, mode);
  for (ParamId id = 0; id < params.size(); ++id) {
    float* v = ddp.param(id).as<float>();
    for (std::int64_t i = 0; i < params[id].numel(); ++i) {
      v[i] = ref.values[id][i] = dyadic(1000 + id, i);
    }
  }
  auto optimizer = make_optimizer(mode, {&ddp}, muon_options(), adamw_options(), world);
  const StepOptions step_options{0.5, true};  // small max norm: clipping is active
  optimizer->set_step_options(step_options);
  ref.optimizer->set_step_options(step_options);

  for (int step = 0; step < 4; ++step) {
    ddp.zero_grad_buffer();
    // Rank r adds (2r - (p-1)) * delta: the perturbations cancel exactly in the average.
    for (ParamId id = params.size(); id-- > 0;) {
      float* g = ddp.main_grad(id).as<float>();
      for (std::int64_t i = 0; i < params[id].numel(); ++i) {
        const float base = dyadic(step * 100 + id, i);
        const float delta = dyadic(step * 100 + id + 50, i) / 4.0f;
        g[i] = base + static_cast<float>(2 * rank - (p - 1)) * delta;
        ref.grads[id][i] = base;
      }
      ddp.register_grad_ready(id);
    }
    ddp.finish_grad_sync();
    const StepResult got = optimizer->step();
    const StepResult want = ref.optimizer->step();
    ASSERT_TRUE(got.stepped && want.stepped);
    EXPECT_NEAR(got.grad_norm, want.grad_norm, 1e-6 * want.grad_norm) << "step " << step;
    EXPECT_EQ(got.num_zeros, want.num_zeros) << "step " << step;
    EXPECT_LT(want.clip_coeff, 1.0) << "the test exercises clipping";
    if (mode != OptimizerKind::kDistributed) {
      // Grad-norm groups: "muon" exists on some rank; its norm is the reference Muon child's.
      const auto& ref_chain = dynamic_cast<const ChainedOptimizer&>(*ref.optimizer);
      EXPECT_TRUE(optimizer->has_grad_norm_group("muon"));
      EXPECT_FALSE(optimizer->has_grad_norm_group("no-such-group"));
      EXPECT_NEAR(optimizer->grad_norm_for_group("muon"),
                  ref_chain.children().front()->get_grad_norm(),
                  1e-6 * ref_chain.children().front()->get_grad_norm());
    }
    for (ParamId id = 0; id < params.size(); ++id) {
      const float* v = ddp.param(id).as<float>();
      for (std::int64_t i = 0; i < params[id].numel(); ++i) {
        ASSERT_NEAR(v[i], ref.values[id][i], 1e-6)
            << params[id].name << "[" << i << "] step " << step << " rank " << rank;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, DistributedOptimizerParity,
                         testing::Values(OptimizerKind::kLayerWise, OptimizerKind::kDistributed,
                                         OptimizerKind::kLegacyLayerWise),
                         [](const auto& info) {
                           std::string name(to_string(info.param));
                           for (char& c : name) c = c == '-' ? '_' : c;
                           return name;
                         });

TEST(LayerWiseOwnership, EveryParamHasExactlyOneOwnerAndBroadcastReachesEveryRank) {
  const ProcessGroupPtr world = init_mpi_world();
  const ParallelGroups groups = make_parallel_groups(world, ParallelSizes{});
  const ParamList params = test_model();
  for (OptimizerKind mode : {OptimizerKind::kLayerWise, OptimizerKind::kLegacyLayerWise}) {
    DistributedDataParallelConfig config;
    auto ddps = wrap_with_ddp({params}, mode, config, DataParallelGroups::from(groups));
    auto optimizer =
        make_optimizer(mode, {ddps.front().get()}, muon_options(), adamw_options(), world);
    auto& chain = dynamic_cast<ChainedOptimizer&>(*optimizer);
    auto& layer_wise = dynamic_cast<LayerWiseDistributedOptimizer&>(*chain.children().front());
    EXPECT_EQ(layer_wise.uses_legacy_sync(), mode == OptimizerKind::kLegacyLayerWise);
    std::set<ParamId> seen;
    for (const auto& [id, owner] : layer_wise.owners()) {
      EXPECT_GE(owner, 0);
      EXPECT_LT(owner, world->size());
      seen.insert(id);
    }
    // Every param the layer-wise side manages has one owner; count what this rank owns and
    // check the ranks together own each param exactly once.
    std::vector<std::int64_t> owned(params.size(), 0);
    for (const auto& slice : layer_wise.owned_params()) owned[slice.param] = 1;
    world
        ->all_reduce(
            TensorView{owned.data(), static_cast<std::int64_t>(owned.size()), DType::kInt64},
            ReduceOp::kSum)
        ->wait();
    for (ParamId id : seen) EXPECT_EQ(owned[id], 1) << params[id].name;

    // broadcast_params: each rank holds the right values only for the params it owns (garbage
    // elsewhere); after the broadcasts every rank holds the right values for every managed param.
    DistributedDataParallel& ddp = *ddps.front();
    for (const auto& [id, owner] : layer_wise.owners()) {
      float* v = ddp.param(id).as<float>();
      for (std::int64_t i = 0; i < params[id].numel(); ++i) {
        v[i] = owner == world->rank() ? dyadic(7 + id, i) : -1e30f;
      }
    }
    layer_wise.broadcast_params();
    for (const auto& [id, owner] : layer_wise.owners()) {
      const float* v = ddp.param(id).as<float>();
      for (std::int64_t i = 0; i < params[id].numel(); ++i) {
        ASSERT_EQ(v[i], dyadic(7 + id, i)) << params[id].name << " owner " << owner;
      }
    }
  }
}

// Runs three steps of the optimizer `make` builds over a fresh all-layer-wise DDP of the test
// model (same values and grads on every call) and returns the params afterwards.
std::vector<std::vector<float>> params_after_steps(
    const std::function<std::unique_ptr<Optimizer>(DistributedDataParallel&)>& make) {
  const ProcessGroupPtr world = init_mpi_world();
  const ParallelGroups groups = make_parallel_groups(world, ParallelSizes{});
  const ParamList params = test_model();
  DistributedDataParallelConfig config;
  config.bucket_size = 3000;
  auto ddps = wrap_with_ddp({params}, OptimizerKind::kLayerWise, config,
                            DataParallelGroups::from(groups), /*all_layer_wise=*/true);
  DistributedDataParallel& ddp = *ddps.front();
  for (ParamId id = 0; id < params.size(); ++id) {
    float* v = ddp.param(id).as<float>();
    for (std::int64_t i = 0; i < params[id].numel(); ++i) v[i] = dyadic(1000 + id, i);
  }
  std::unique_ptr<Optimizer> optimizer = make(ddp);
  for (int step = 0; step < 3; ++step) {
    ddp.zero_grad_buffer();
    for (ParamId id = params.size(); id-- > 0;) {
      float* g = ddp.main_grad(id).as<float>();
      for (std::int64_t i = 0; i < params[id].numel(); ++i) g[i] = dyadic(step * 100 + id, i);
      ddp.register_grad_ready(id);
    }
    ddp.finish_grad_sync();
    EXPECT_TRUE(optimizer->step().stepped);
  }
  std::vector<std::vector<float>> out;
  for (ParamId id = 0; id < params.size(); ++id) {
    const float* v = ddp.param(id).as<float>();
    out.emplace_back(v, v + params[id].numel());
  }
  return out;
}

const BufferSelector kAllBuffers = [](const BufferKey&) { return true; };

TEST(LayerWiseCallerOptimizers, MuonAndAdamWGivenByTheCallerMatchTheConveniencePath) {
  const auto convenience = params_after_steps([](DistributedDataParallel& ddp) {
    return std::make_unique<LayerWiseDistributedOptimizer>(ddp, kAllBuffers, muon_options(),
                                                           adamw_options());
  });
  std::vector<std::string> initialised;
  const auto given = params_after_steps([&](DistributedDataParallel& ddp) {
    std::vector<LayerWiseChild> children;
    children.push_back({[](const ParamInfo& p) { return is_managed_by_layer_wise_optimizer(p); },
                        [](std::vector<ParamGroup> g) {
                          return std::make_unique<Muon>(std::move(g), muon_options());
                        }});
    children.push_back({[](const ParamInfo& p) { return !is_managed_by_layer_wise_optimizer(p); },
                        [](std::vector<ParamGroup> g) {
                          return std::make_unique<AdamW>(std::move(g), adamw_options());
                        }});
    std::vector<InitStateFn> init;
    for (int c = 0; c < 2; ++c) {
      init.push_back([&](Optimizer& child) { initialised.emplace_back(child.kind()); });
    }
    auto optimizer = std::make_unique<LayerWiseDistributedOptimizer>(
        ddp, kAllBuffers, std::move(children), std::move(init));
    EXPECT_EQ(optimizer->children().size(), 2u);
    return optimizer;
  });
  EXPECT_EQ(initialised, (std::vector<std::string>{"muon", "adamw"}));
  ASSERT_EQ(given.size(), convenience.size());
  for (std::size_t id = 0; id < given.size(); ++id) EXPECT_EQ(given[id], convenience[id]) << id;
}

TEST(LayerWiseCallerOptimizers, AnyOptimizerOverTheManagedParams) {
  // One AdamW over every param: each rank updates what it owns, the gather spreads it, so every
  // rank ends with what a single-process AdamW computes from the same grads.
  const auto got = params_after_steps([](DistributedDataParallel& ddp) {
    std::vector<LayerWiseChild> children{{[](const ParamInfo&) { return true; },
                                          [](std::vector<ParamGroup> g) {
                                            return std::make_unique<AdamW>(std::move(g),
                                                                           adamw_options());
                                          }}};
    return std::make_unique<LayerWiseDistributedOptimizer>(ddp, kAllBuffers, std::move(children));
  });
  const ParamList params = test_model();
  Reference ref = make_reference(params, OptimizerKind::kDistributed);  // AdamW everywhere
  for (ParamId id = 0; id < params.size(); ++id) {
    for (std::int64_t i = 0; i < params[id].numel(); ++i) ref.values[id][i] = dyadic(1000 + id, i);
  }
  for (int step = 0; step < 3; ++step) {
    for (ParamId id = 0; id < params.size(); ++id) {
      for (std::int64_t i = 0; i < params[id].numel(); ++i) {
        ref.grads[id][i] = dyadic(step * 100 + id, i);
      }
    }
    ASSERT_TRUE(ref.optimizer->step().stepped);
  }
  for (ParamId id = 0; id < params.size(); ++id) EXPECT_EQ(got[id], ref.values[id]) << id;
}

TEST(LayerWiseCallerOptimizers, BadChildrenAreRejected) {
  const ProcessGroupPtr world = init_mpi_world();
  const ParallelGroups groups = make_parallel_groups(world, ParallelSizes{});
  auto ddps = wrap_with_ddp({test_model()}, OptimizerKind::kLayerWise, {},
                            DataParallelGroups::from(groups), /*all_layer_wise=*/true);
  const auto adamw = [](std::vector<ParamGroup> g) {
    return std::make_unique<AdamW>(std::move(g), adamw_options());
  };
  const auto matrices = [](const ParamInfo& p) { return p.shape.size() == 2; };
  // Norms and biases are selected by no child.
  EXPECT_THROW(LayerWiseDistributedOptimizer(*ddps.front(), kAllBuffers, {{matrices, adamw}}),
               InvalidArgument);
  // Matrices selected twice.
  EXPECT_THROW(LayerWiseDistributedOptimizer(
                   *ddps.front(), kAllBuffers,
                   {{matrices, adamw}, {[](const ParamInfo&) { return true; }, adamw}}),
               InvalidArgument);
  // One init function for two children.
  const auto rest = [](const ParamInfo& p) { return p.shape.size() != 2; };
  EXPECT_THROW(
      LayerWiseDistributedOptimizer(*ddps.front(), kAllBuffers, {{matrices, adamw}, {rest, adamw}},
                                    {[](Optimizer&) {}}),
      InvalidArgument);
  EXPECT_THROW(
      LayerWiseDistributedOptimizer(*ddps.front(), kAllBuffers, std::vector<LayerWiseChild>{}),
      InvalidArgument);
}

}  // namespace
}  // namespace shardwise::optim
