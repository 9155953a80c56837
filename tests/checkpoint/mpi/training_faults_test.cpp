// Multi-rank faults of the trainer: every rank must reach the same outcome (no rank left waiting
// in a collective) when training goes non-finite, when the --save root is locked by another job,
// and when an output path is unusable - and nothing is published from a non-finite state.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <optional>
#include <string>

#include "../../shared_temp_dir.hpp"
#include "shardwise/checkpoint/checkpoint.hpp"
#include "shardwise/checkpoint/checkpoint_root_lock.hpp"
#include "shardwise/comm/mpi_process_group.hpp"
#include "shardwise/train/nonfinite_steps.hpp"
#include "shardwise/train/trainer.hpp"

namespace shardwise {
namespace {

using test::shared_temp_dir;

namespace fs = std::filesystem;

TrainingConfig tiny_config(double lr = 0.003, int skip_nonfinite_steps = 0) {
  return parse_training_config(str_cat(R"(
model: {layers: 1, hidden: 16, heads: 2, ffn: 32}
data: {source: synthetic, task: addition, digits: 2, eval_samples: 16}
optimizer: {kind: distributed, weight_decay: 0, lr: )",
                                       lr, R"(}
training: {steps: 8, micro_batch_size: 4, warmup_steps: 0, eval_interval: 0,
           skip_nonfinite_steps: )",
                                       skip_nonfinite_steps, R"(}
logging: {progress: false}
)"));
}

void remove_shared(ProcessGroup& world, const fs::path& dir) {
  world.barrier()->wait();
  if (world.rank() == 0) fs::remove_all(dir);
  world.barrier()->wait();
}

template <typename E>
std::string error_of(const TrainingConfig& config, const ProcessGroupPtr& world,
                     const TrainerOptions& options) {
  try {
    run_training(config, world, options);
  } catch (const E& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(TrainingFaultsMpi, NonFiniteTrainingStopsEveryRankAndPublishesNothing) {
  const ProcessGroupPtr world = init_mpi_world();
  const fs::path dir = shared_temp_dir(*world);
  TrainerOptions options;
  options.quiet = true;
  options.save_dir = (dir / "ckpt").string();
  // lr 1e30 overflows the weights within a few steps; the run must stop, not save them.
  const std::string m = error_of<NonFiniteTrainingError>(tiny_config(1e30), world, options);
  EXPECT_NE(m.find("non-finite training state"), std::string::npos) << m;
  EXPECT_NE(m.find("training.skip_nonfinite_steps=0"), std::string::npos) << m;
  world->barrier()->wait();
  EXPECT_FALSE(fs::exists(dir / "ckpt" / "latest"));
  // With an allowance the run skips that many steps on every rank, then stops all the same.
  const std::string skipped =
      error_of<NonFiniteTrainingError>(tiny_config(1e30, 2), world, options);
  EXPECT_NE(skipped.find("2 step(s) skipped before"), std::string::npos) << skipped;
  remove_shared(*world, dir);
}

TEST(TrainingFaultsMpi, LockedSaveRootAndUnusableOutputsFailOnEveryRank) {
  const ProcessGroupPtr world = init_mpi_world();
  const fs::path dir = shared_temp_dir(*world);
  std::optional<CheckpointRootLock> other_job;
  if (world->rank() == 0) other_job.emplace(dir / "ckpt");
  TrainerOptions options;
  options.quiet = true;
  options.save_dir = (dir / "ckpt").string();
  const TrainingConfig config = tiny_config();
  std::string m = error_of<IoError>(config, world, options);
  EXPECT_NE(m.find("is in use by another job"), std::string::npos) << m;
  world->barrier()->wait();
  other_job.reset();
  EXPECT_EQ(error_of<Error>(config, world, options), "(no error)");
  world->barrier()->wait();
  EXPECT_TRUE(fs::exists(dir / "ckpt" / "step-0000008" / "checkpoint.json"));

  TrainerOptions bad_log = options;
  bad_log.log_jsonl = (dir / "missing" / "m.jsonl").string();
  m = error_of<IoError>(config, world, bad_log);
  EXPECT_NE(m.find("--log-jsonl '" + bad_log.log_jsonl + "' is not writable"), std::string::npos)
      << m;
  remove_shared(*world, dir);
}

}  // namespace
}  // namespace shardwise
