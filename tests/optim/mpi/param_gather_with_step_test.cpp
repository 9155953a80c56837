// overlap_param_gather_with_optimizer_step at the optimizer level: the distributed optimizers
// update their bucket groups in forward order and, with the option on, have every group's
// all-gather dispatched by the time step() returns (off: only what start_param_sync dispatches),
// while the resulting params are bit-identical to the option off, for fp32 and bf16 params
// (bf16: the main -> model copy must land before the group's gather ships it).
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <memory>
#include <ostream>
#include <vector>

#include "shardwise/comm/mpi_process_group.hpp"
#include "shardwise/core/float_convert.hpp"
#include "shardwise/layout/model_zoo.hpp"
#include "shardwise/optim/chained_optimizer.hpp"
#include "shardwise/optim/data_parallel_setup.hpp"
#include "shardwise/optim/distributed_optimizer.hpp"
#include "shardwise/optim/layer_wise_distributed_optimizer.hpp"

namespace shardwise::optim {
namespace {

ParamList small_model(DType dtype) {
  TransformerConfig c;
  c.name = "gather-with-step";
  c.num_layers = 3;
  c.hidden_size = 32;
  c.ffn_hidden_size = 48;
  c.num_attention_heads = 4;
  c.vocab_size = 80;
  c.dtype = dtype;
  return generate_transformer_params(c);
}

void write_value(const TensorView& v, std::int64_t i, float x) {
  if (v.dtype == DType::kBFloat16) {
    v.as<bf16_bits>()[i] = float_to_bf16(x);
  } else {
    ASSERT_EQ(v.dtype, DType::kFloat32);
    v.as<float>()[i] = x;
  }
}

// The bytes of every param, in forward order (what the next forward pass reads).
std::vector<unsigned char> param_bytes(const DistributedDataParallel& ddp) {
  std::vector<unsigned char> out;
  for (ParamId id = 0; id < ddp.params().size(); ++id) {
    const TensorView v = ddp.param(id);
    const auto* p = static_cast<const unsigned char*>(v.data);
    out.insert(out.end(), p, p + v.nbytes());
  }
  return out;
}

struct TrainingRig {
  std::unique_ptr<DistributedDataParallel> ddp;
  std::unique_ptr<Optimizer> optimizer;
};

TrainingRig make_run(const ParamList& params, OptimizerKind mode, bool overlap_param_gather,
                     bool with_step, const ProcessGroupPtr& world) {
  DistributedDataParallelConfig config;
  config.overlap_grad_reduce = true;
  config.overlap_param_gather = overlap_param_gather;
  config.bucket_size = 1500;  // several bucket groups per buffer
  auto ddps = wrap_with_ddp({params}, mode, config, DataParallelGroups{world, nullptr});
  TrainingRig run;
  run.ddp = std::move(ddps.front());
  // Same initial params on every rank, before the optimizer takes its main copies.
  for (ParamId id = 0; id < params.size(); ++id) {
    const TensorView v = run.ddp->param(id);
    for (std::int64_t i = 0; i < v.numel; ++i) {
      write_value(v, i, 0.05f * std::sin(0.37f * static_cast<float>(i) + static_cast<float>(id)));
    }
  }
  MuonOptions muon;
  muon.lr = 0.01;
  AdamWOptions adamw;
  adamw.lr = 0.003;
  run.optimizer = make_optimizer(mode, {run.ddp.get()}, muon, adamw, world, with_step);
  run.optimizer->set_step_options({1.0, false});
  return run;
}

// One iteration: rank-dependent grads registered in backprop order, then the optimizer step.
void train_step(TrainingRig& run, int step, int rank) {
  DistributedDataParallel& ddp = *run.ddp;
  ddp.zero_grad_buffer();
  for (ParamId id = ddp.params().size(); id-- > 0;) {
    float* g = ddp.main_grad(id).as<float>();
    const std::int64_t n = ddp.main_grad(id).numel;
    for (std::int64_t i = 0; i < n; ++i) {
      g[i] = std::cos(0.11f * static_cast<float>(i * (rank + 2)) +
                      0.7f * static_cast<float>(id + static_cast<ParamId>(step)));
    }
    ddp.register_grad_ready(id);
  }
  ddp.finish_grad_sync();
  EXPECT_TRUE(run.optimizer->step().stepped);  // the same on every rank (global grad norm)
}

int gathers_dispatched(const DistributedDataParallel& ddp) {
  int n = 0;
  for (const auto& g : ddp.bucket_groups()) n += g->param_sync_dispatched() ? 1 : 0;
  return n;
}

// Installs a hook on every distributed child that, before a group is updated, checks whether the
// group updated just before it (same child, step order) has its gather in flight. Returns the
// counters the hooks fill: [0] pairs seen, [1] pairs whose earlier gather was in flight.
std::shared_ptr<std::array<int, 2>> trace_gathers_in_flight(Optimizer& optimizer,
                                                            const DistributedDataParallel& ddp) {
  auto counts = std::make_shared<std::array<int, 2>>();
  for (const auto& child : dynamic_cast<ChainedOptimizer&>(optimizer).children()) {
    auto previous = std::make_shared<int>(-1);
    auto hook = [counts, previous, &ddp](int group) {
      const auto& groups = ddp.bucket_groups();
      const bool first_of_step =
          *previous < 0 || *previous <= group;  // forward order: indices descend within a step
      if (!first_of_step) {
        ++(*counts)[0];
        if (groups[static_cast<std::size_t>(*previous)]->param_sync_pending()) ++(*counts)[1];
      }
      *previous = group;
    };
    if (auto* lw = dynamic_cast<LayerWiseDistributedOptimizer*>(child.get())) {
      lw->set_before_group_step(hook);
    } else if (auto* d = dynamic_cast<DistributedOptimizer*>(child.get())) {
      d->set_before_group_step(hook);
    }
  }
  return counts;
}

struct GatherCase {
  OptimizerKind mode;
  DType dtype;
  bool overlap_param_gather;
};

void PrintTo(const GatherCase& c, std::ostream* os) {
  *os << to_string(c.mode) << " " << dtype_name(c.dtype)
      << (c.overlap_param_gather ? " overlap_param_gather" : " sync param gather");
}

class ParamGatherWithStep : public testing::TestWithParam<GatherCase> {};

TEST_P(ParamGatherWithStep, SameBitsAndEveryGatherDispatchedByTheStep) {
  const ProcessGroupPtr world = init_mpi_world();
  const GatherCase c = GetParam();
  const ParamList params = small_model(c.dtype);
  TrainingRig off = make_run(params, c.mode, c.overlap_param_gather, false, world);
  TrainingRig on = make_run(params, c.mode, c.overlap_param_gather, true, world);
  const int groups = static_cast<int>(on.ddp->bucket_groups().size());
  ASSERT_GT(groups, 2) << "the test needs several bucket groups";
  const std::vector<unsigned char> initial = param_bytes(*on.ddp);

  // Each child steps its groups in forward order (descending index) and they cover all groups.
  int covered = 0;
  int pairs = 0;  // (group, next group) pairs within a child, per step
  for (const auto& child : dynamic_cast<ChainedOptimizer&>(*on.optimizer).children()) {
    std::vector<int> order;
    if (auto* lw = dynamic_cast<LayerWiseDistributedOptimizer*>(child.get())) {
      EXPECT_TRUE(lw->overlaps_param_gather_with_step());
      order = lw->step_order();
    } else if (auto* d = dynamic_cast<DistributedOptimizer*>(child.get())) {
      EXPECT_TRUE(d->overlaps_param_gather_with_step());
      order = d->step_order();
    }
    for (std::size_t i = 1; i < order.size(); ++i) EXPECT_GT(order[i - 1], order[i]);
    covered += static_cast<int>(order.size());
    pairs += static_cast<int>(order.size()) - 1;
  }
  EXPECT_EQ(covered, groups);

  const auto on_trace = trace_gathers_in_flight(*on.optimizer, *on.ddp);
  const auto off_trace = trace_gathers_in_flight(*off.optimizer, *off.ddp);
  for (int step = 0; step < 4; ++step) {
    train_step(off, step, world->rank());
    train_step(on, step, world->rank());
    if (c.overlap_param_gather) {
      // On: every group was shipped during the step and is left in flight for the forward pass.
      EXPECT_EQ(gathers_dispatched(*on.ddp), groups) << "step " << step;
      // Off: start_param_sync dispatches only the first group (in forward order) of each child.
      EXPECT_LT(gathers_dispatched(*off.ddp), groups) << "step " << step;
      on.ddp->finish_all_param_sync();
      off.ddp->finish_all_param_sync();
    } else {
      for (const auto& g : on.ddp->bucket_groups()) EXPECT_FALSE(g->param_sync_pending());
    }
    // EXPECT, not ASSERT: a rank returning early would leave the others in a collective.
    EXPECT_TRUE(param_bytes(*on.ddp) == param_bytes(*off.ddp)) << "params differ at step " << step;
  }
  // On: group k's gather is in flight when group k+1's update starts; off: none is.
  EXPECT_EQ((*on_trace)[0], 4 * pairs);
  EXPECT_GT(pairs, 0);
  EXPECT_EQ((*on_trace)[1], (*on_trace)[0]);
  EXPECT_EQ((*off_trace)[0], (*on_trace)[0]);
  EXPECT_EQ((*off_trace)[1], 0);
  EXPECT_TRUE(param_bytes(*on.ddp) != initial) << "the optimizer changed nothing";
  EXPECT_TRUE(on.optimizer->state_dict() == off.optimizer->state_dict()) << "states differ";

  // Every rank holds the same (gathered) params: compare with rank 0's.
  std::vector<unsigned char> mine = param_bytes(*on.ddp), root = mine;
  world
      ->broadcast(TensorView{root.data(), static_cast<std::int64_t>(root.size()), DType::kUInt8}, 0)
      ->wait();
  EXPECT_TRUE(mine == root) << "ranks hold different params";
}

INSTANTIATE_TEST_SUITE_P(
    Modes, ParamGatherWithStep,
    testing::Values(GatherCase{OptimizerKind::kLayerWise, DType::kFloat32, true},
                    GatherCase{OptimizerKind::kLayerWise, DType::kBFloat16, true},
                    GatherCase{OptimizerKind::kLayerWise, DType::kFloat32, false},
                    GatherCase{OptimizerKind::kDistributed, DType::kFloat32, true},
                    GatherCase{OptimizerKind::kDistributed, DType::kBFloat16, true},
                    GatherCase{OptimizerKind::kDistributed, DType::kBFloat16, false}),
    [](const testing::TestParamInfo<GatherCase>& info) {
      const GatherCase& c = info.param;
      return str_cat(c.mode == OptimizerKind::kLayerWise ? "layer_wise" : "distributed", "_",
                     c.dtype == DType::kFloat32 ? "fp32" : "bf16",
                     c.overlap_param_gather ? "_overlap_param_gather" : "_sync_param_gather");
    });

TEST(ParamGatherWithStep, LegacyLayerWisePathRejectsTheOption) {
  const ProcessGroupPtr world = init_mpi_world();
  const ParamList params = small_model(DType::kFloat32);
  DistributedDataParallelConfig config;
  auto ddps = wrap_with_ddp({params}, OptimizerKind::kLegacyLayerWise, config,
                            DataParallelGroups{world, nullptr});
  const auto all = [](const BufferKey&) { return true; };
  EXPECT_THROW(LayerWiseDistributedOptimizer(*ddps.front(), all, MuonOptions{}, AdamWOptions{},
                                             /*overlap_param_gather_with_optimizer_step=*/true),
               InvalidArgument);
  EXPECT_THROW(ddps.front()->start_param_sync_for_group(0), InvalidArgument);
  // make_optimizer ignores it for modes without a buffer all-gather.
  EXPECT_NO_THROW(make_optimizer(OptimizerKind::kLegacyLayerWise, {ddps.front().get()},
                                 MuonOptions{}, AdamWOptions{}, world, true));
}

TEST(ParamGatherWithStep, UnknownGroupIsRejected) {
  const ProcessGroupPtr world = init_mpi_world();
  TrainingRig run =
      make_run(small_model(DType::kFloat32), OptimizerKind::kDistributed, true, true, world);
  const int groups = static_cast<int>(run.ddp->bucket_groups().size());
  EXPECT_THROW(run.ddp->start_param_sync_for_group(groups), InvalidArgument);
  EXPECT_THROW(run.ddp->start_param_sync_for_group(-1), InvalidArgument);
}

}  // namespace
}  // namespace shardwise::optim
