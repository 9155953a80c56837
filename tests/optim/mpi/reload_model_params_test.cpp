// reload_model_params: with bf16 param buffers the distributed optimizers step fp32 main copies
// taken when they were built. Params written afterwards (weights loaded, or initialised after
// the optimizer was made) reach the update only through reload_model_params(); with it, training
// is bit-identical to a run whose params were written before the optimizer existed.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "shardwise/comm/mpi_process_group.hpp"
#include "shardwise/core/float_convert.hpp"
#include "shardwise/layout/model_zoo.hpp"
#include "shardwise/optim/data_parallel_setup.hpp"

namespace shardwise::optim {
namespace {

ParamList bf16_reload_model() {
  TransformerConfig c;
  c.name = "reload-model-params";
  c.num_layers = 2;
  c.hidden_size = 32;
  c.ffn_hidden_size = 48;
  c.num_attention_heads = 4;
  c.vocab_size = 64;
  c.dtype = DType::kBFloat16;
  return generate_transformer_params(c);
}

struct ReloadRig {
  std::unique_ptr<DistributedDataParallel> ddp;
  std::unique_ptr<Optimizer> optimizer;
};

void write_reload_params(DistributedDataParallel& ddp) {
  for (ParamId id = 0; id < ddp.params().size(); ++id) {
    const TensorView v = ddp.param(id);
    for (std::int64_t i = 0; i < v.numel; ++i) {
      v.as<bf16_bits>()[i] =
          float_to_bf16(0.05f * std::sin(0.41f * static_cast<float>(i) + static_cast<float>(id)));
    }
  }
}

// `write_first`: params written before the optimizer is built (its main copies see them);
// otherwise after, as a load into an existing job would.
ReloadRig make_reload_rig(OptimizerKind kind, bool write_first, double lr,
                          const ProcessGroupPtr& world) {
  auto ddps = wrap_with_ddp({bf16_reload_model()}, kind, DistributedDataParallelConfig{},
                            DataParallelGroups{world, nullptr});
  ReloadRig rig;
  rig.ddp = std::move(ddps.front());
  if (write_first) write_reload_params(*rig.ddp);
  MuonOptions muon;
  muon.lr = lr;
  AdamWOptions adamw;
  adamw.lr = lr;
  adamw.weight_decay = 0.0;
  muon.weight_decay = 0.0;
  rig.optimizer = make_optimizer(kind, {rig.ddp.get()}, muon, adamw, world, false);
  rig.optimizer->set_step_options({0.0, false});
  if (!write_first) write_reload_params(*rig.ddp);
  return rig;
}

void reload_rig_step(ReloadRig& rig, int step, int rank) {
  DistributedDataParallel& ddp = *rig.ddp;
  ddp.zero_grad_buffer();
  for (ParamId id = ddp.params().size(); id-- > 0;) {
    const TensorView g = ddp.main_grad(id);
    for (std::int64_t i = 0; i < g.numel; ++i) {
      g.as<float>()[i] = std::cos(0.13f * static_cast<float>(i * (rank + 1)) +
                                  0.5f * static_cast<float>(id + static_cast<ParamId>(step)));
    }
    ddp.register_grad_ready(id);
  }
  ddp.finish_grad_sync();
  EXPECT_TRUE(rig.optimizer->step().stepped);
  ddp.finish_all_param_sync();
}

std::vector<bf16_bits> reload_rig_params(const DistributedDataParallel& ddp) {
  std::vector<bf16_bits> out;
  for (ParamId id = 0; id < ddp.params().size(); ++id) {
    const TensorView v = ddp.param(id);
    out.insert(out.end(), v.as<bf16_bits>(), v.as<bf16_bits>() + v.numel);
  }
  return out;
}

class ReloadModelParams : public testing::TestWithParam<OptimizerKind> {};

TEST_P(ReloadModelParams, WithoutItAStepWithZeroLrOverwritesParamsWrittenLater) {
  const ProcessGroupPtr world = init_mpi_world();
  ReloadRig rig = make_reload_rig(GetParam(), false, 0.0, world);
  const std::vector<bf16_bits> written = reload_rig_params(*rig.ddp);
  reload_rig_step(rig, 0, world->rank());
  EXPECT_TRUE(reload_rig_params(*rig.ddp) != written)
      << "the stale main copies should have replaced the params (what reload exists for)";
}

TEST_P(ReloadModelParams, TrainsAsIfTheParamsWereWrittenBeforeTheOptimizer) {
  const ProcessGroupPtr world = init_mpi_world();
  ReloadRig before = make_reload_rig(GetParam(), true, 0.01, world);
  ReloadRig after = make_reload_rig(GetParam(), false, 0.01, world);
  after.optimizer->reload_model_params();
  const std::vector<bf16_bits> initial = reload_rig_params(*before.ddp);
  ASSERT_TRUE(reload_rig_params(*after.ddp) == initial);
  for (int step = 0; step < 3; ++step) {
    reload_rig_step(before, step, world->rank());
    reload_rig_step(after, step, world->rank());
    EXPECT_TRUE(reload_rig_params(*after.ddp) == reload_rig_params(*before.ddp))
        << "params differ after step " << step;
  }
  EXPECT_TRUE(reload_rig_params(*after.ddp) != initial) << "the optimizer changed nothing";
}

INSTANTIATE_TEST_SUITE_P(DistributedKinds, ReloadModelParams,
                         testing::Values(OptimizerKind::kDistributed, OptimizerKind::kLayerWise),
                         [](const testing::TestParamInfo<OptimizerKind>& info) {
                           return info.param == OptimizerKind::kDistributed ? "distributed"
                                                                            : "layer_wise";
                         });

}  // namespace
}  // namespace shardwise::optim
