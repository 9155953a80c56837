// Tensor parallelism through the whole training stack. A run at tp = 2 (x dp = world / 2) must
// follow the tp = 1 run with the same global batch on the same DP size: losses within 1e-5
// relative for 20 steps, with and without sequence parallelism, for every optimizer kind (Muon
// orthogonalises the full matrices; the grad norm counts TP duplicates once). tp = 4 where the
// heads allow; tp x dp against dp = 1 with the same global batch; and checkpoints saved at
// tp = 2 x dp = 2 resume at tp = 1 x dp = 2 and tp = 2 x dp = 1 with the same next-step loss.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <filesystem>
#include <string>

#include "../../shared_temp_dir.hpp"
#include "shardwise/comm/mpi_process_group.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/train/trainer.hpp"

namespace shardwise {
namespace {

using test::shared_temp_dir;

namespace fs = std::filesystem;

struct RunShape {
  std::string optimizer = "layer-wise";
  int tp = 1;
  bool sequence_parallel = false;
  int steps = 20;
  int accum = 1;
};

TrainingConfig config_for(const RunShape& r) {
  return parse_training_config(
      str_cat(R"(
model: {layers: 2, hidden: 32, heads: 4, ffn: 64}
data: {source: synthetic, task: addition, digits: 2, eval_samples: 64}
optimizer: {kind: )",
              r.optimizer, R"(, lr: 0.003, min_lr: 0.0003, muon_lr: 0.002}
training: {steps: )",
              r.steps, R"(, micro_batch_size: 4, grad_accumulation: )", r.accum,
              R"(, warmup_steps: 3, eval_interval: 0}
parallel: {tp: )",
              r.tp, ", sequence_parallel: ", r.sequence_parallel ? "true" : "false", R"(}
comm_overlap: {bucket_size: 4096}
logging: {progress: false}
)"));
}

TrainerOptions quiet_trainer() {
  TrainerOptions o;
  o.quiet = true;
  return o;
}

// The first `size` world ranks as their own world (the others get an unused group).
ProcessGroupPtr first_ranks(const ProcessGroupPtr& world, int size) {
  return split_group(world, world->rank() < size ? 0 : 1, world->rank(), "first_ranks");
}

void expect_same_losses(const TrainingSummary& got, const TrainingSummary& want, double rel,
                        const std::string& what) {
  ASSERT_EQ(got.steps.size(), want.steps.size()) << what;
  for (std::size_t i = 0; i < want.steps.size(); ++i) {
    EXPECT_NEAR(got.steps[i].loss, want.steps[i].loss, rel * std::fabs(want.steps[i].loss))
        << what << " step " << i + 1;
    EXPECT_NEAR(got.steps[i].grad_norm, want.steps[i].grad_norm,
                10 * rel * want.steps[i].grad_norm + 1e-7)
        << what << " step " << i + 1;
  }
  EXPECT_LT(want.steps.back().loss, want.steps.front().loss) << what << ": the model learns";
}

using Param = std::tuple<std::string, bool>;
class TensorParallelParity : public testing::TestWithParam<Param> {};

TEST_P(TensorParallelParity, Tp2MatchesTp1OnTheSameDataParallelSize) {
  const ProcessGroupPtr world = init_mpi_world();
  const auto& [optimizer, sp] = GetParam();
  const int dp = world->size() / 2;
  const TrainingSummary tp2 = run_training(config_for({optimizer, 2, sp}), world, quiet_trainer());
  // The same DP size without TP: the first dp ranks.
  const ProcessGroupPtr reference = first_ranks(world, dp);
  if (world->rank() < dp) {
    const TrainingSummary tp1 =
        run_training(config_for({optimizer, 1, false}), reference, quiet_trainer());
    if (world->rank() == 0) {
      // Each TP rank really holds shards (fewer parameters than the whole model).
      EXPECT_LT(tp2.parameters, tp1.parameters);
      expect_same_losses(tp2, tp1, 1e-5, str_cat(optimizer, " sp=", sp, " dp=", dp));
      EXPECT_NEAR(tp2.final_eval->eval_loss, tp1.final_eval->eval_loss,
                  1e-5 * tp1.final_eval->eval_loss);
    }
  }
  world->barrier()->wait();
}

INSTANTIATE_TEST_SUITE_P(EveryOptimizer, TensorParallelParity,
                         testing::Combine(testing::Values("layer-wise", "distributed", "ddp",
                                                          "legacy-layer-wise"),
                                          testing::Bool()),
                         [](const auto& info) {
                           std::string name = std::get<0>(info.param);
                           for (char& c : name) c = c == '-' ? '_' : c;
                           return name + (std::get<1>(info.param) ? "_sp" : "_no_sp");
                         });

// tp = world size (4 heads: tp = 4 at np 4) and tp x dp against one rank with the same global
// batch (accumulation instead of DP ranks).
TEST(TensorParallelTraining, WholeWorldTpAndTpTimesDpMatchOneRank) {
  const ProcessGroupPtr world = init_mpi_world();
  const int p = world->size();
  const TrainingSummary wide =
      run_training(config_for({"layer-wise", p, true}), world, quiet_trainer());
  const TrainingSummary mixed =
      p >= 4 ? run_training(config_for({"layer-wise", 2, true}), world, quiet_trainer())
             : TrainingSummary{};
  const ProcessGroupPtr solo = first_ranks(world, 1);
  if (world->rank() == 0) {
    RunShape one;
    const TrainingSummary single = run_training(config_for(one), solo, quiet_trainer());
    expect_same_losses(wide, single, 1e-5, str_cat("tp=", p));
    if (p >= 4) {
      one.accum = p / 2;
      const TrainingSummary accumulated = run_training(config_for(one), solo, quiet_trainer());
      // DP ranks against accumulation: the grads are summed in another order, which stays far
      // inside the issue's 1e-5.
      expect_same_losses(mixed, accumulated, 1e-5, str_cat("tp=2 x dp=", p / 2));
    }
  }
  world->barrier()->wait();
}

// Saved at tp = 2 x dp = 2 after step 4 (full tensors); resumed at tp = 1 x dp = 2 and at
// tp = 2 x dp = 1 (same global batch by accumulation), step 5 has the loss the saving run had.
TEST(TensorParallelCheckpoint, SavedAtTp2Dp2ResumesAtOtherTpAndDp) {
  const ProcessGroupPtr world = init_mpi_world();
  if (world->size() != 4) GTEST_SKIP() << "needs 4 ranks";
  const fs::path dir = shared_temp_dir(*world);
  for (const std::string optimizer : {"layer-wise", "distributed"}) {
    TrainerOptions save = quiet_trainer();
    save.save_dir = (dir / optimizer).string();
    save.save_interval = 4;
    RunShape shape{optimizer, 2, true, 5};
    const TrainingSummary saved = run_training(config_for(shape), world, save);
    const double want = saved.steps.at(4).loss;
    const ProcessGroupPtr pair = first_ranks(world, 2);
    if (world->rank() < 2) {
      TrainerOptions load = quiet_trainer();
      load.load_dir = save.save_dir;
      load.load_step = 4;
      RunShape tp1{optimizer, 1, false, 5};
      const TrainingSummary a = run_training(config_for(tp1), pair, load);
      RunShape tp2{optimizer, 2, true, 5, 2};
      const TrainingSummary b = run_training(config_for(tp2), pair, load);
      ASSERT_EQ(a.steps.size(), 1u);
      ASSERT_EQ(b.steps.size(), 1u);
      EXPECT_NEAR(a.steps[0].loss, want, 1e-6 * std::fabs(want)) << optimizer << " tp=1 x dp=2";
      EXPECT_NEAR(b.steps[0].loss, want, 1e-6 * std::fabs(want)) << optimizer << " tp=2 x dp=1";
    }
    world->barrier()->wait();
  }
  if (world->rank() == 0) fs::remove_all(dir);
  world->barrier()->wait();
}

}  // namespace
}  // namespace shardwise
