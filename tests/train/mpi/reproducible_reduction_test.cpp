// ddp.reproducible_reduction through the whole training stack: the same global batch at dp =
// world size, half of it and 1 (the rest made up by grad accumulation) gives bit-identical
// losses, grad norms and final weights for every optimizer kind, and a checkpoint saved at dp 2
// resumed at another dp continues exactly like an uninterrupted single-rank run.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <vector>

#include "../../shared_temp_dir.hpp"
#include "shardwise/comm/mpi_process_group.hpp"
#include "shardwise/train/trainer.hpp"

namespace shardwise {
namespace {

TrainingConfig reproducible_config(const std::string& kind, int accum, int steps,
                                   const std::string& shard_group = "dp") {
  return parse_training_config(str_cat(R"(
model: {layers: 2, hidden: 32, heads: 4, ffn: 64}
data: {source: synthetic, task: addition, digits: 2, eval_samples: 16}
optimizer: {kind: )",
                                       kind, R"(, lr: 0.003, min_lr: 0.0003, clip_grad: 0.5}
training: {steps: )",
                                       steps, R"(, micro_batch_size: 4, grad_accumulation: )",
                                       accum, R"(, warmup_steps: 2, eval_interval: 0}
comm_overlap: {bucket_size: 2048}
ddp: {reproducible_reduction: true, layer_wise_shard_group_size: )",
                                       shard_group, R"(}
logging: {progress: false}
)"));
}

// What a run produced, as bits: every step's loss and grad norm, and the final weights.
struct RunBits {
  std::vector<std::uint64_t> losses;
  std::vector<std::uint64_t> grad_norms;
  std::vector<float> weights;  // every param, forward order
};

RunBits run_bits(const TrainingConfig& config, const ProcessGroupPtr& group,
                 TrainerOptions options = {}) {
  options.quiet = true;
  RunBits bits;
  options.on_finish = [&bits](const TrainedModel& model) {
    for (const TensorView& v : model.values) {
      const float* p = v.as<float>();
      bits.weights.insert(bits.weights.end(), p, p + v.numel);
    }
  };
  const TrainingSummary summary = run_training(config, group, options);
  for (const StepMetrics& s : summary.steps) {
    bits.losses.push_back(std::bit_cast<std::uint64_t>(s.loss));
    bits.grad_norms.push_back(std::bit_cast<std::uint64_t>(s.grad_norm));
  }
  return bits;
}

void expect_same_bits(const RunBits& got, const RunBits& want, const std::string& what,
                      std::size_t first_step = 0) {
  ASSERT_EQ(got.losses.size() + first_step, want.losses.size()) << what;
  for (std::size_t i = 0; i < got.losses.size(); ++i) {
    EXPECT_EQ(got.losses[i], want.losses[first_step + i]) << what << ": loss, step " << i + 1;
    EXPECT_EQ(got.grad_norms[i], want.grad_norms[first_step + i])
        << what << ": grad norm, step " << i + 1;
  }
  ASSERT_EQ(got.weights.size(), want.weights.size()) << what;
  EXPECT_EQ(std::memcmp(got.weights.data(), want.weights.data(), got.weights.size() * 4), 0)
      << what << ": final weights differ";
}

// The ranks below `dp` as a group (null on the others).
ProcessGroupPtr first_ranks(const ProcessGroupPtr& world, int dp, const std::string& name) {
  return split_group(world, world->rank() < dp ? 0 : -1, world->rank(), name);
}

class ReproducibleReduction : public testing::TestWithParam<std::string> {};

TEST_P(ReproducibleReduction, SameBitsAtEveryDataParallelSize) {
  const ProcessGroupPtr world = init_mpi_world();
  const int p = world->size();
  constexpr int kSteps = 6;
  // Two micro-batches per rank at dp = p, so every run also sums micro-batches locally.
  const RunBits whole = run_bits(reproducible_config(GetParam(), 2, kSteps), world);
  for (const int dp : {p / 2, 1}) {
    if (dp < 1) continue;
    const ProcessGroupPtr sub = first_ranks(world, dp, str_cat("reproducible_dp", dp));
    if (sub) {
      const RunBits part = run_bits(reproducible_config(GetParam(), 2 * p / dp, kSteps), sub);
      expect_same_bits(part, whole, str_cat(GetParam(), " dp=", dp, " vs dp=", p));
    }
    world->barrier()->wait();
  }
  if (GetParam() == "layer-wise" && p >= 2) {
    // Layer-wise shard groups of half the ranks: the owned shards differ, the bits do not.
    const RunBits grouped =
        run_bits(reproducible_config(GetParam(), 2, kSteps, std::to_string(p / 2)), world);
    expect_same_bits(grouped, whole, str_cat("shard groups of ", p / 2));
  }
}

INSTANTIATE_TEST_SUITE_P(EveryOptimizer, ReproducibleReduction,
                         testing::Values("layer-wise", "distributed", "ddp", "legacy-layer-wise"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name) c = c == '-' ? '_' : c;
                           return name;
                         });

TEST(ReproducibleReductionResume, CheckpointAtDp2ResumesExactlyAtAnotherDp) {
  const ProcessGroupPtr world = init_mpi_world();
  const int p = world->size();
  if (p < 2) GTEST_SKIP() << "needs at least 2 ranks";
  constexpr int kSteps = 8, kSaveAt = 4;
  const std::filesystem::path dir = test::shared_temp_dir(*world);
  // Uninterrupted reference on one rank; the global batch is 2 * p micro-batches throughout.
  RunBits reference;
  if (const ProcessGroupPtr solo = first_ranks(world, 1, "reproducible_solo")) {
    reference = run_bits(reproducible_config("layer-wise", 2 * p, kSteps), solo);
  }
  world->barrier()->wait();
  if (const ProcessGroupPtr pair = first_ranks(world, 2, "reproducible_pair")) {
    TrainerOptions saving;
    saving.save_dir = dir.string();
    saving.save_interval = kSaveAt;
    run_bits(reproducible_config("layer-wise", p, kSteps), pair, saving);
  }
  world->barrier()->wait();
  TrainerOptions resuming;
  resuming.load_dir = dir.string();
  resuming.load_step = kSaveAt;
  const RunBits resumed = run_bits(reproducible_config("layer-wise", 2, kSteps), world, resuming);
  if (world->rank() == 0) {
    expect_same_bits(resumed, reference, str_cat("saved at dp=2, resumed at dp=", p), kSaveAt);
  }
  world->barrier()->wait();
  if (world->rank() == 0) std::filesystem::remove_all(dir);
  world->barrier()->wait();
}

TEST(ReproducibleReductionRule, ThreeRanksAreRefusedNamingDp) {
  const ProcessGroupPtr world = init_mpi_world();
  if (world->size() < 3) GTEST_SKIP() << "needs at least 3 ranks";
  if (const ProcessGroupPtr three = first_ranks(world, 3, "reproducible_three")) {
    try {
      run_bits(reproducible_config("layer-wise", 1, 1), three);
      ADD_FAILURE() << "dp=3 accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("dp is 3"), std::string::npos) << e.what();
    }
  }
  world->barrier()->wait();
}

}  // namespace
}  // namespace shardwise
