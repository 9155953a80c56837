// Layer-wise shard groups through the whole training stack, overlap on: dp = world size with
// S = dp/2 matches S = dp and a single rank with the same global batch, and a checkpoint saved
// with shard groups resumes at other (dp, S) with the same next-step losses.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <cstdio>
#include <filesystem>

#include "../../shared_temp_dir.hpp"
#include "shardwise/checkpoint/checkpoint.hpp"
#include "shardwise/comm/mpi_process_group.hpp"
#include "shardwise/train/trainer.hpp"

namespace shardwise {
namespace {

using test::shared_temp_dir;

namespace fs = std::filesystem;

// shard_group: "dp" or a number.
TrainingConfig shard_group_config(const std::string& shard_group, int accum, int steps = 20) {
  return parse_training_config(str_cat(R"(
model: {layers: 2, hidden: 32, heads: 4, ffn: 64}
data: {source: synthetic, task: addition, digits: 2, eval_samples: 64}
optimizer: {kind: layer-wise, lr: 0.003, min_lr: 0.0003}
training: {steps: )",
                                       steps, R"(, micro_batch_size: 4, grad_accumulation: )",
                                       accum,
                                       R"(, warmup_steps: 3, eval_interval: 0}
comm_overlap: {bucket_size: 2048, overlap_grad_reduce: true}
ddp: {layer_wise_shard_group_size: )",
                                       shard_group, R"(}
logging: {progress: false}
)"));
}

TrainerOptions quiet() {
  TrainerOptions o;
  o.quiet = true;
  return o;
}

// The largest relative loss / grad-norm deviation of `got` from `want`, steps aligned.
std::pair<double, double> worst_deviation(const TrainingSummary& got, const TrainingSummary& want,
                                          std::size_t want_offset = 0) {
  double loss = 0, norm = 0;
  for (std::size_t i = 0; i < got.steps.size(); ++i) {
    const StepMetrics& w = want.steps[want_offset + i];
    loss = std::max(loss, std::fabs(got.steps[i].loss / w.loss - 1));
    norm = std::max(norm, std::fabs(got.steps[i].grad_norm / w.grad_norm - 1));
  }
  return {loss, norm};
}

TEST(ShardGroupTraining, HalfDpShardGroupsMatchOneGroupAndASingleRank) {
  const ProcessGroupPtr world = init_mpi_world();
  const int p = world->size();
  if (p < 2) GTEST_SKIP() << "needs at least 2 ranks";
  const std::string s = std::to_string(p / 2);
  const TrainingSummary grouped = run_training(shard_group_config(s, 1), world, quiet());
  const TrainingSummary one_group = run_training(shard_group_config("dp", 1), world, quiet());
  ASSERT_EQ(grouped.steps.size(), 20u);
  ASSERT_EQ(one_group.steps.size(), 20u);
  for (std::size_t i = 0; i < 20; ++i) {
    // Only where the fp32 grads are summed differs (shard group then replicas vs all at once).
    EXPECT_NEAR(grouped.steps[i].loss, one_group.steps[i].loss,
                1e-5 * std::fabs(one_group.steps[i].loss))
        << "S=" << s << " vs S=dp, step " << i + 1;
    // A grad norm counting replica copies twice would be off by up to sqrt(dp/S).
    EXPECT_NEAR(grouped.steps[i].grad_norm, one_group.steps[i].grad_norm,
                1e-5 * one_group.steps[i].grad_norm)
        << "S=" << s << " vs S=dp, step " << i + 1;
  }
  const ProcessGroupPtr solo = split_group(world, world->rank() == 0 ? 0 : -1, 0, "solo");
  if (world->rank() == 0) {
    const TrainingSummary single = run_training(shard_group_config("dp", p), solo, quiet());
    ASSERT_EQ(single.steps.size(), 20u);
    for (std::size_t i = 0; i < 20; ++i) {
      EXPECT_NEAR(grouped.steps[i].loss, single.steps[i].loss,
                  1e-5 * std::fabs(single.steps[i].loss))
          << "S=" << s << " vs dp=1, step " << i + 1;
    }
    const auto [vs_group_loss, vs_group_norm] = worst_deviation(grouped, one_group);
    const auto [vs_single_loss, vs_single_norm] = worst_deviation(grouped, single);
    std::printf(
        "[ shard groups ] dp=%d S=%s over 20 steps: max relative deviation vs S=dp "
        "loss %.2e grad_norm %.2e; vs dp=1 loss %.2e grad_norm %.2e\n",
        p, s.c_str(), vs_group_loss, vs_group_norm, vs_single_loss, vs_single_norm);
  }
  world->barrier()->wait();
}

// Each param of the checkpoint's index is covered exactly once: replicas saved nothing twice.
void expect_each_element_saved_once(const nlohmann::json& manifest) {
  for (const auto& param : manifest.at("model").at("params")) {
    std::int64_t numel = 1;
    for (const auto& d : param.at("shape")) numel *= d.get<std::int64_t>();
    std::int64_t saved = 0;
    for (const auto& entry : manifest.at("index").at(param.at("name").get<std::string>())) {
      saved += entry.at("end").get<std::int64_t>() - entry.at("start").get<std::int64_t>();
    }
    EXPECT_EQ(saved, numel) << param.at("name");
  }
}

TEST(ShardGroupTraining, CheckpointWithShardGroupsResumesAtOtherDpAndShardGroupSizes) {
  const ProcessGroupPtr world = init_mpi_world();
  const int p = world->size();
  if (p < 2) GTEST_SKIP() << "needs at least 2 ranks";
  const int s = p / 2;
  const fs::path dir = shared_temp_dir(*world);
  TrainerOptions saving = quiet();
  saving.save_dir = dir.string();
  saving.save_interval = 10;
  const TrainingSummary full =
      run_training(shard_group_config(std::to_string(s), 1), world, saving);
  ASSERT_EQ(full.steps.size(), 20u);
  if (world->rank() == 0) {
    const auto manifest = read_checkpoint_manifest(dir / "step-0000010");
    EXPECT_EQ(manifest.at("layer_wise_replicas"), p / s);
    expect_each_element_saved_once(manifest);
  }

  // (dp, S) to resume at: (p/2, p/2), (p, p) and (1, 1); the global batch kept by accumulation.
  struct Target {
    int dp;
    std::string shard_group;
  };
  for (const Target& t : {Target{p / 2, "dp"}, Target{p, "dp"}, Target{1, "dp"}}) {
    const ProcessGroupPtr sub = split_group(world, world->rank() < t.dp ? 0 : -1, world->rank(),
                                            str_cat("resume_dp", t.dp));
    if (world->rank() < t.dp) {
      TrainerOptions resuming = quiet();
      resuming.load_dir = dir.string();
      resuming.load_step = 10;
      const TrainingSummary resumed =
          run_training(shard_group_config(t.shard_group, p / t.dp), sub, resuming);
      ASSERT_EQ(resumed.steps.size(), 10u);
      // The next step's loss comes from the loaded weights and the same samples: identical.
      EXPECT_EQ(resumed.steps[0].loss, full.steps[10].loss) << "resumed at dp=" << t.dp;
      for (std::size_t i = 1; i < resumed.steps.size(); ++i) {
        EXPECT_NEAR(resumed.steps[i].loss, full.steps[10 + i].loss,
                    1e-5 * std::fabs(full.steps[10 + i].loss))
            << "resumed at dp=" << t.dp << ", step " << 11 + i;
      }
      if (sub->rank() == 0) {
        const auto [loss, norm] = worst_deviation(resumed, full, 10);
        std::printf(
            "[ shard groups ] saved at dp=%d S=%d, resumed at dp=%d S=%d: next-step loss "
            "%.9g vs %.9g; max relative deviation loss %.2e grad_norm %.2e\n",
            p, s, t.dp, t.dp, resumed.steps[0].loss, full.steps[10].loss, loss, norm);
      }
    }
    world->barrier()->wait();
  }
  world->barrier()->wait();
  if (world->rank() == 0) fs::remove_all(dir);
  world->barrier()->wait();
}

}  // namespace
}  // namespace shardwise
