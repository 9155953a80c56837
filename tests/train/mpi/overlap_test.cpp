// The resolved data-parallel overlap settings take effect in the trainer: with the default
// resolution for the distributed optimizers at dp > 1 (overlap_grad_reduce on) every bucket
// group's reduce-scatter is dispatched during backward; with comm_overlap.overlap_grad_reduce =
// false none is (all at finish_grad_sync). Overlap only moves communication in time: the loss
// curves, grad norms, held-out results and final params are bit-identical with overlap on or off
// and with overlap_param_gather_with_optimizer_step on or off.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "shardwise/comm/mpi_process_group.hpp"
#include "shardwise/train/trainer.hpp"
#include "train/mpi/trained_param_bytes.hpp"

namespace shardwise {
namespace {

TrainingConfig overlap_config(const std::string& optimizer, int accum,
                              const std::string& comm_overlap_extra = "") {
  return parse_training_config(str_cat(R"(
model: {layers: 2, hidden: 32, heads: 4, ffn: 64}
data: {source: synthetic, task: addition, digits: 2, eval_samples: 64}
optimizer: {kind: )",
                                       optimizer, R"(, lr: 0.003, min_lr: 0.0003}
training: {steps: 12, micro_batch_size: 4, grad_accumulation: )",
                                       accum, R"(, warmup_steps: 2, eval_interval: 0}
comm_overlap: {bucket_size: 2048)",
                                       comm_overlap_extra, R"(}
logging: {progress: false}
)"));
}

struct Outcome {
  TrainingSummary summary;
  std::vector<unsigned char> params;  // every param's bytes at the end, forward order
};

Outcome train(const TrainingConfig& config, std::optional<bool> gather_with_step = std::nullopt) {
  TrainerOptions options;
  options.quiet = true;
  options.overlap_param_gather_with_optimizer_step = gather_with_step;
  Outcome out;
  options.on_finish = [&out](const TrainedModel& model) {
    out.params = train_test::trained_param_bytes(model);
  };
  out.summary = run_training(config, init_mpi_world(), options);
  return out;
}

void expect_bit_identical(const Outcome& a, const Outcome& b, const std::string& what) {
  ASSERT_EQ(a.summary.steps.size(), b.summary.steps.size()) << what;
  for (std::size_t i = 0; i < a.summary.steps.size(); ++i) {
    EXPECT_EQ(a.summary.steps[i].loss, b.summary.steps[i].loss) << what << ", step " << i + 1;
    EXPECT_EQ(a.summary.steps[i].grad_norm, b.summary.steps[i].grad_norm)
        << what << ", step " << i + 1;
  }
  ASSERT_TRUE(a.summary.final_eval && b.summary.final_eval);
  EXPECT_EQ(a.summary.final_eval->eval_loss, b.summary.final_eval->eval_loss) << what;
  EXPECT_EQ(a.summary.final_eval->accuracy, b.summary.final_eval->accuracy) << what;
  ASSERT_FALSE(a.params.empty());
  EXPECT_TRUE(a.params == b.params) << what << ": final params differ";
}

struct Case {
  std::string optimizer;
  int accum;
};

class TrainerOverlap : public testing::TestWithParam<Case> {};

TEST_P(TrainerOverlap, GradReduceIsDispatchedDuringBackwardOnlyWhenOverlapIsOn) {
  const Case c = GetParam();
  ASSERT_GT(init_mpi_world()->size(), 1) << "run under mpirun -np 2 or more";
  const Outcome overlapped = train(overlap_config(c.optimizer, c.accum));
  const Outcome at_end =
      train(overlap_config(c.optimizer, c.accum, ", overlap_grad_reduce: false"));
  const Outcome nothing_overlapped = train(overlap_config(
      c.optimizer, c.accum, ", overlap_grad_reduce: false, overlap_param_gather: false"));

  // Default resolution at dp > 1: overlap on, several bucket groups, all dispatched in backward.
  const int groups = overlapped.summary.bucket_groups;
  EXPECT_GT(groups, 2) << "bucket_size 2048 should give several bucket groups";
  for (const StepMetrics& s : overlapped.summary.steps) {
    EXPECT_GT(s.groups_dispatched_in_backward, 0) << "step " << s.step;
    EXPECT_EQ(s.groups_dispatched_in_backward, groups) << "step " << s.step;
  }
  // overlap_grad_reduce off: one group per buffer, none dispatched before finish_grad_sync.
  EXPECT_GE(at_end.summary.bucket_groups, 1);
  EXPECT_LT(at_end.summary.bucket_groups, groups);
  for (const Outcome* run : {&at_end, &nothing_overlapped}) {
    for (const StepMetrics& s : run->summary.steps) {
      EXPECT_EQ(s.groups_dispatched_in_backward, 0) << "step " << s.step;
    }
  }

  expect_bit_identical(overlapped, at_end, "overlap_grad_reduce on vs off");
  expect_bit_identical(overlapped, nothing_overlapped, "all DP overlap on vs off");

  // The step's time split: compute, then the grad-sync wait, then the optimizer, consecutive
  // parts of step_ms; exposed_ms is what is not compute.
  for (const Outcome* run : {&overlapped, &at_end}) {
    for (const StepMetrics& s : run->summary.steps) {
      EXPECT_GT(s.compute_ms, 0) << "step " << s.step;
      EXPECT_GE(s.grad_sync_wait_ms, 0) << "step " << s.step;
      EXPECT_GT(s.optimizer_ms, 0) << "step " << s.step;
      EXPECT_LE(s.compute_ms + s.grad_sync_wait_ms + s.optimizer_ms, s.step_ms + 1e-9)
          << "step " << s.step;
      EXPECT_NEAR(s.exposed_ms, s.step_ms - s.compute_ms, 1e-9) << "step " << s.step;
      EXPECT_GE(s.exposed_ms, s.grad_sync_wait_ms + s.optimizer_ms - 1e-9) << "step " << s.step;
    }
  }
  EXPECT_LT(overlapped.summary.steps.back().loss, overlapped.summary.steps.front().loss)
      << "the model learns";
}

TEST_P(TrainerOverlap, ParamGatherWithOptimizerStepGivesTheSameBits) {
  const Case c = GetParam();
  const TrainingConfig config = overlap_config(c.optimizer, c.accum);
  const Outcome plain = train(config, false);
  const Outcome with_step = train(config, true);
  expect_bit_identical(plain, with_step, "overlap_param_gather_with_optimizer_step on vs off");
  // Also without overlap_param_gather (the optimizer then waits for its gathers itself).
  const Outcome sync_gather =
      train(overlap_config(c.optimizer, c.accum, ", overlap_param_gather: false"), true);
  expect_bit_identical(plain, sync_gather, "gather with optimizer step, overlap_param_gather off");
}

TEST_P(TrainerOverlap, GatherDuringStepFromTheOptimizerSectionGivesTheSameBits) {
  // What a `shardwise train` user writes: the optimizer section's key, at pp = 1.
  const Case c = GetParam();
  TrainingConfig during = overlap_config(c.optimizer, c.accum);
  during.optimizer.overlap_param_gather_with_optimizer_step = true;
  TrainingConfig resolved = during;
  resolve_comm_overlap(resolved, init_mpi_world()->size());
  EXPECT_TRUE(resolved.optimizer.overlap_param_gather_with_optimizer_step);
  expect_bit_identical(train(overlap_config(c.optimizer, c.accum)), train(during),
                       "optimizer.overlap_param_gather_with_optimizer_step on vs off");
}

INSTANTIATE_TEST_SUITE_P(DistributedOptimizers, TrainerOverlap,
                         testing::Values(Case{"layer-wise", 1}, Case{"layer-wise", 2},
                                         Case{"distributed", 1}),
                         [](const testing::TestParamInfo<Case>& info) {
                           std::string name = info.param.optimizer;
                           for (char& ch : name) ch = ch == '-' ? '_' : ch;
                           return str_cat(name, "_accum", info.param.accum);
                         });

}  // namespace
}  // namespace shardwise
