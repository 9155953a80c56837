// Multi-rank checkpoint tests through the trainer: a checkpoint saved at dp = world size resumes
// bit-identically at the same dp (every optimizer mode), resumes at smaller dp sizes and another
// bucket size within fp32 summation-order tolerance (layer-wise and distributed), and a save that
// fails on one rank publishes nothing and leaves the previous checkpoint loadable.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>

#include "../../shared_temp_dir.hpp"
#include "shardwise/checkpoint/checkpoint.hpp"
#include "shardwise/checkpoint/checkpoint_root_lock.hpp"
#include "shardwise/comm/mpi_process_group.hpp"
#include "shardwise/core/atomic_file.hpp"
#include "shardwise/train/trainer.hpp"

namespace shardwise {
namespace {

using test::shared_temp_dir;

namespace fs = std::filesystem;

TrainingConfig small_config(const std::string& optimizer, int accum, int steps,
                            int bucket_size = 4096) {
  return parse_training_config(str_cat(R"(
model: {layers: 2, hidden: 32, heads: 4, ffn: 64}
data: {source: synthetic, task: addition, digits: 2, eval_samples: 64}
optimizer: {kind: )",
                                       optimizer, R"(, lr: 0.003, min_lr: 0.0003}
training: {steps: )",
                                       steps, R"(, micro_batch_size: 4, grad_accumulation: )",
                                       accum,
                                       R"(, warmup_steps: 3, eval_interval: 0}
comm_overlap: {bucket_size: )",
                                       bucket_size, R"(}
logging: {progress: false}
)"));
}

void remove_shared_dir(ProcessGroup& world, const fs::path& dir) {
  world.barrier()->wait();
  if (world.rank() == 0) fs::remove_all(dir);
  world.barrier()->wait();
}

TrainerOptions quiet() {
  TrainerOptions o;
  o.quiet = true;
  return o;
}

std::vector<std::string> hidden_entries(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name == kCheckpointLockFile) continue;  // the save root's lock file stays, by design
    if (!name.empty() && name[0] == '.') out.push_back(name);
  }
  return out;
}

class SameDpResume : public testing::TestWithParam<std::string> {};

TEST_P(SameDpResume, ContinuesBitIdentically) {
  const ProcessGroupPtr world = init_mpi_world();
  const fs::path dir = shared_temp_dir(*world);
  const TrainingConfig config = small_config(GetParam(), 1, 20);
  const TrainingSummary uninterrupted = run_training(config, world, quiet());

  TrainerOptions saving = quiet();
  saving.save_dir = dir.string();
  saving.save_interval = 10;
  const TrainingSummary saved = run_training(config, world, saving);
  ASSERT_EQ(saved.steps.size(), uninterrupted.steps.size());
  for (std::size_t i = 0; i < saved.steps.size(); ++i) {
    EXPECT_EQ(saved.steps[i].loss, uninterrupted.steps[i].loss) << "saving perturbed step " << i;
  }
  EXPECT_EQ(saved.checkpoints.size(), 2u);
  EXPECT_EQ(read_pointer_file(dir / "latest"), "step-0000020");

  TrainerOptions resuming = quiet();
  resuming.load_dir = dir.string();
  resuming.load_step = 10;
  const TrainingSummary resumed = run_training(config, world, resuming);
  EXPECT_EQ(resumed.start_step, 10);
  ASSERT_EQ(resumed.steps.size(), 10u);
  for (std::size_t i = 0; i < resumed.steps.size(); ++i) {
    const StepMetrics& want = uninterrupted.steps[10 + i];
    EXPECT_EQ(resumed.steps[i].step, want.step);
    EXPECT_EQ(resumed.steps[i].loss, want.loss) << GetParam() << " step " << want.step;
    EXPECT_EQ(resumed.steps[i].grad_norm, want.grad_norm) << GetParam() << " step " << want.step;
    EXPECT_EQ(resumed.steps[i].lr, want.lr) << GetParam() << " step " << want.step;
  }
  EXPECT_EQ(resumed.final_eval->eval_loss, uninterrupted.final_eval->eval_loss);

  // The manifest records what a resume needs.
  const auto manifest = read_checkpoint_manifest(dir / "step-0000010");
  EXPECT_EQ(manifest.at("data_parallel_size"), world->size());
  EXPECT_EQ(manifest.at("trainer").at("consumed_samples"), 10 * 4 * world->size());
  EXPECT_TRUE(manifest.at("config").is_object());
  remove_shared_dir(*world, dir);
}

INSTANTIATE_TEST_SUITE_P(EveryOptimizer, SameDpResume,
                         testing::Values("layer-wise", "distributed", "ddp", "legacy-layer-wise"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name) c = c == '-' ? '_' : c;
                           return name;
                         });

class SmallerDpResume : public testing::TestWithParam<std::string> {};

TEST_P(SmallerDpResume, ContinuesWithinSummationOrderTolerance) {
  const ProcessGroupPtr world = init_mpi_world();
  const int p = world->size();
  const fs::path dir = shared_temp_dir(*world);
  TrainerOptions saving = quiet();
  saving.save_dir = dir.string();
  saving.save_interval = 10;
  const TrainingSummary full = run_training(small_config(GetParam(), 1, 20), world, saving);

  // Sub-worlds of p/2 and 1 ranks; the global batch is kept by accumulating p/dp micro-batches,
  // and the bucket size changes too (a different layout on both counts).
  std::vector<int> sizes{std::max(1, p / 2)};
  if (sizes.front() != 1) sizes.push_back(1);
  int resumed_runs = 0;
  for (int dp : sizes) {
    const ProcessGroupPtr sub =
        split_group(world, world->rank() < dp ? 0 : -1, world->rank(), str_cat("dp", dp));
    if (world->rank() < dp) {
      TrainerOptions resuming = quiet();
      resuming.load_dir = dir.string();
      resuming.load_step = 10;
      const TrainingSummary resumed =
          run_training(small_config(GetParam(), p / dp, 20, 2048), sub, resuming);
      ASSERT_EQ(resumed.steps.size(), 10u);
      ++resumed_runs;
      double worst_loss = 0, worst_norm = 0;
      for (std::size_t i = 0; i < resumed.steps.size(); ++i) {
        const StepMetrics& want = full.steps[10 + i];
        worst_loss = std::max(worst_loss, std::fabs(resumed.steps[i].loss / want.loss - 1));
        worst_norm =
            std::max(worst_norm, std::fabs(resumed.steps[i].grad_norm / want.grad_norm - 1));
        // Only the order in which fp32 gradients are summed differs (ranks vs accumulation).
        EXPECT_NEAR(resumed.steps[i].loss, want.loss, 2e-4 * std::fabs(want.loss))
            << GetParam() << " dp=" << dp << " step " << want.step;
        EXPECT_NEAR(resumed.steps[i].grad_norm, want.grad_norm, 2e-3 * want.grad_norm + 1e-6)
            << GetParam() << " dp=" << dp << " step " << want.step;
        EXPECT_EQ(resumed.steps[i].lr, want.lr);
      }
      EXPECT_NEAR(resumed.final_eval->eval_loss, full.final_eval->eval_loss,
                  1e-3 * full.final_eval->eval_loss);
      if (sub->rank() == 0) {
        std::printf(
            "[ resumed  ] %s dp=%d -> dp=%d: max relative deviation loss %.2e, "
            "grad_norm %.2e\n",
            GetParam().c_str(), p, dp, worst_loss, worst_norm);
      }
    }
    world->barrier()->wait();
  }
  if (world->rank() == 0) {
    EXPECT_EQ(resumed_runs, static_cast<int>(sizes.size()));
  }
  remove_shared_dir(*world, dir);
}

INSTANTIATE_TEST_SUITE_P(DistributedModes, SmallerDpResume,
                         testing::Values("layer-wise", "distributed"), [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name) c = c == '-' ? '_' : c;
                           return name;
                         });

TEST(FailedSave, OneFailingRankPublishesNothingAndKeepsPreviousCheckpoint) {
  const ProcessGroupPtr world = init_mpi_world();
  const int last = world->size() - 1;
  const fs::path dir = shared_temp_dir(*world);
  TrainerOptions saving = quiet();
  saving.save_dir = dir.string();
  saving.save_interval = 5;
  run_training(small_config("distributed", 1, 5), world, saving);
  ASSERT_EQ(read_pointer_file(dir / "latest"), "step-0000005");

  // Resume and save again at step 10, with the last rank failing while writing its file (and,
  // in a second round, rank 0 failing just before it commits).
  for (const auto& [stage, failing] : std::vector<std::pair<std::string, int>>{
           {"rank_file_written", last}, {"before_commit", 0}}) {
    set_checkpoint_fault_hook([stage = stage, failing = failing](std::string_view s, int rank) {
      if (s == stage && rank == failing) throw IoError(str_cat("injected failure at ", s));
    });
    TrainerOptions resuming = saving;
    resuming.load_dir = dir.string();
    std::string message;
    try {
      run_training(small_config("distributed", 1, 10), world, resuming);
    } catch (const IoError& e) {
      message = e.what();
    }
    set_checkpoint_fault_hook({});
    EXPECT_NE(message.find("nothing was published"), std::string::npos) << message;
    if (world->rank() == failing) {
      EXPECT_NE(message.find("injected failure"), std::string::npos) << message;
    }
    world->barrier()->wait();
    EXPECT_EQ(read_pointer_file(dir / "latest"), "step-0000005") << stage;
    EXPECT_FALSE(fs::exists(dir / "step-0000010")) << stage;
    EXPECT_EQ(hidden_entries(dir), std::vector<std::string>{})
        << stage << ": a staging directory was left behind";
    world->barrier()->wait();
  }

  // The previous checkpoint still loads and training continues from it.
  TrainerOptions resuming = quiet();
  resuming.load_dir = dir.string();
  const TrainingSummary resumed = run_training(small_config("distributed", 1, 10), world, resuming);
  EXPECT_EQ(resumed.start_step, 5);
  EXPECT_EQ(resumed.steps.size(), 5u);
  remove_shared_dir(*world, dir);
}

TEST(BadCheckpointMpi, MissingRankFileFailsOnEveryRankNamingTheFile) {
  const ProcessGroupPtr world = init_mpi_world();
  const fs::path dir = shared_temp_dir(*world);
  TrainerOptions saving = quiet();
  saving.save_dir = dir.string();
  run_training(small_config("distributed", 1, 3), world, saving);
  world->barrier()->wait();
  const std::string victim = optimizer_rank_file_name(world->size() - 1, world->size());
  if (world->rank() == 0) fs::remove(dir / "step-0000003" / victim);
  world->barrier()->wait();
  TrainerOptions resuming = quiet();
  resuming.load_dir = dir.string();
  std::string message;
  try {
    run_training(small_config("distributed", 1, 6), world, resuming);
  } catch (const Error& e) {
    message = e.what();
  }
  EXPECT_NE(message.find(victim), std::string::npos) << message;
  remove_shared_dir(*world, dir);
}

// The same --load path holding another run's checkpoint on some ranks (node-local storage): the
// ranks used to resume each from its own copy and train on the mix. Every rank refuses now.
TEST(BadCheckpointMpi, ACheckpointThatDiffersOnOneRankIsRefusedOnEveryRank) {
  const ProcessGroupPtr world = init_mpi_world();
  if (world->size() == 1) GTEST_SKIP() << "needs a second rank to differ";
  const fs::path dir = shared_temp_dir(*world);
  TrainerOptions saving = quiet();
  saving.save_dir = (dir / "ours").string();
  run_training(small_config("distributed", 1, 3), world, saving);
  saving.save_dir = (dir / "theirs").string();
  TrainingConfig other = small_config("distributed", 1, 3);
  other.training.seed += 1;
  run_training(other, world, saving);
  TrainerOptions resuming = quiet();
  resuming.load_dir = (dir / (world->rank() == world->size() - 1 ? "theirs" : "ours")).string();
  std::string message;
  try {
    run_training(small_config("distributed", 1, 6), world, resuming);
  } catch (const Error& e) {
    message = e.what();
  }
  EXPECT_NE(
      message.find("is not the same on every rank: rank(s) " + std::to_string(world->size() - 1)),
      std::string::npos)
      << message;
  remove_shared_dir(*world, dir);
}

}  // namespace
}  // namespace shardwise
