// Data-parallel parity of the whole training stack: a run at dp = world size equals a dp=1 run
// with the same global batch (grad accumulation instead of ranks), for every optimizer mode, and
// identical runs are bit-identical.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>

#include "shardwise/comm/mpi_process_group.hpp"
#include "shardwise/train/trainer.hpp"

namespace shardwise {
namespace {

TrainingConfig small_config(const std::string& optimizer, int accum) {
  TrainingConfig c = parse_training_config(str_cat(R"(
model: {layers: 2, hidden: 32, heads: 4, ffn: 64}
data: {source: synthetic, task: addition, digits: 2, eval_samples: 64}
optimizer: {kind: )",
                                                   optimizer, R"(, lr: 0.003, min_lr: 0.0003}
training: {steps: 30, micro_batch_size: 4, grad_accumulation: )",
                                                   accum,
                                                   R"(, warmup_steps: 3, eval_interval: 0}
comm_overlap: {bucket_size: 4096}
logging: {progress: false}
)"));
  return c;
}

class TrainerParity : public testing::TestWithParam<std::string> {};

TEST_P(TrainerParity, DataParallelMatchesSingleRankWithSameGlobalBatch) {
  const ProcessGroupPtr world = init_mpi_world();
  const int p = world->size();
  TrainerOptions quiet;
  quiet.quiet = true;
  const TrainingSummary parallel = run_training(small_config(GetParam(), 1), world, quiet);

  // Rank 0 alone, accumulating p micro-batches per step: the same global batch.
  const ProcessGroupPtr solo = split_group(world, world->rank() == 0 ? 0 : -1, 0, "solo");
  if (world->rank() == 0) {
    const TrainingSummary single = run_training(small_config(GetParam(), p), solo, quiet);
    ASSERT_EQ(single.steps.size(), parallel.steps.size());
    for (std::size_t i = 0; i < single.steps.size(); ++i) {
      // Only the summation order of gradients differs (ranks vs accumulation): fp32 rounding.
      EXPECT_NEAR(parallel.steps[i].loss, single.steps[i].loss,
                  2e-4 * std::fabs(single.steps[i].loss))
          << GetParam() << " step " << i + 1;
      EXPECT_NEAR(parallel.steps[i].grad_norm, single.steps[i].grad_norm,
                  2e-3 * single.steps[i].grad_norm + 1e-6)
          << GetParam() << " step " << i + 1;
    }
    EXPECT_NEAR(parallel.final_eval->eval_loss, single.final_eval->eval_loss,
                1e-3 * single.final_eval->eval_loss);
    EXPECT_LT(single.steps.back().loss, single.steps.front().loss) << "the model learns";
  }
  world->barrier()->wait();
}

INSTANTIATE_TEST_SUITE_P(EveryOptimizer, TrainerParity,
                         testing::Values("layer-wise", "distributed", "ddp", "legacy-layer-wise"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name) c = c == '-' ? '_' : c;
                           return name;
                         });

// Before any update every run holds the same weights and sees the same micro-batches, only split
// differently over ranks: the step's loss (the mean over global micro-batches in global order)
// has the same bits at dp = p, at dp = p/2 with 2 micro-batches per rank, and on one rank. (A
// per-rank mean summed over ranks would add (0+2)+(1+3) at dp = 2 and ((0+1)+2)+3 at dp = 4.)
TEST(TrainerDeterminism, FirstStepLossHasTheSameBitsAtAnyDataParallelSplit) {
  const ProcessGroupPtr world = init_mpi_world();
  const int p = world->size();
  TrainerOptions quiet;
  quiet.quiet = true;
  auto first_loss_bits = [&](int dp) {
    const ProcessGroupPtr sub = split_group(world, world->rank() < dp ? 0 : -1, world->rank(),
                                            str_cat("first_loss_dp", dp));
    std::uint64_t bits = 0;
    if (sub) {
      TrainingConfig config = small_config("layer-wise", p / dp);
      config.training.steps = 1;  // only the first step's loss is compared
      config.training.warmup_steps = 1;
      const TrainingSummary s = run_training(config, sub, quiet);
      bits = std::bit_cast<std::uint64_t>(s.steps.front().loss);
    }
    world->barrier()->wait();
    return bits;
  };
  const std::uint64_t whole = first_loss_bits(p);
  const std::uint64_t half = p % 2 == 0 ? first_loss_bits(p / 2) : whole;
  const std::uint64_t one = first_loss_bits(1);
  if (world->rank() == 0) {
    EXPECT_EQ(whole, one) << "dp=" << p << " vs dp=1";
    EXPECT_EQ(half, one) << "dp=" << p / 2 << " vs dp=1";
  }
}

TEST(TrainerDeterminism, IdenticalRunsAreBitIdentical) {
  const ProcessGroupPtr world = init_mpi_world();
  TrainerOptions quiet;
  quiet.quiet = true;
  const auto a = run_training(small_config("layer-wise", 1), world, quiet);
  const auto b = run_training(small_config("layer-wise", 1), world, quiet);
  ASSERT_EQ(a.steps.size(), b.steps.size());
  for (std::size_t i = 0; i < a.steps.size(); ++i) {
    EXPECT_EQ(a.steps[i].loss, b.steps[i].loss) << i;
    EXPECT_EQ(a.steps[i].grad_norm, b.steps[i].grad_norm) << i;
    EXPECT_EQ(a.steps[i].lr, b.steps[i].lr) << i;
  }
  EXPECT_EQ(a.final_eval->eval_loss, b.final_eval->eval_loss);
  EXPECT_EQ(a.final_eval->accuracy, b.final_eval->accuracy);
}

}  // namespace
}  // namespace shardwise
