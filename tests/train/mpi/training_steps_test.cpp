// The trainer's steps on their own (src/train/training_run.hpp), on every rank of the job:
// held-out evaluation against numbers computed without it, and one training step applying a
// finite update or skipping (then refusing) a non-finite one on every rank alike; and
// TrainerOptions::on_step, called once per step of a whole run.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "../../../src/train/training_run.hpp"
#include "shardwise/comm/mpi_process_group.hpp"
#include "shardwise/train/trainer.hpp"

namespace shardwise::train_detail {
namespace {

TrainingConfig tiny_config(const std::string& optimizer) {
  return parse_training_config(str_cat(R"(
model: {layers: 2, hidden: 32, heads: 4, ffn: 64}
data: {source: synthetic, task: addition, digits: 2, eval_samples: 50}
optimizer: {kind: )",
                                       optimizer, R"(, lr: 0.003, min_lr: 0.0003}
training: {steps: 4, micro_batch_size: 4, grad_accumulation: 2, warmup_steps: 1}
comm_overlap: {bucket_size: 4096}
logging: {progress: false}
)"));
}

struct Built {
  RunContext run;
  TrainingModel m;
};

Built build(const std::string& optimizer) {
  TrainerOptions quiet;
  quiet.quiet = true;
  Built b{build_parallel_state(tiny_config(optimizer), init_mpi_world(), quiet), {}};
  b.m = build_model_and_data(b.run, *b.run.groups.world);
  build_ddp_and_optimizer(b.m, b.run);
  return b;
}

// Every weight of the model, bit for bit (NaN included).
std::vector<float> all_weights(const TrainingModel& m) {
  std::vector<float> out;
  for (ParamId id = 0; id < m.model->params().size(); ++id) {
    const TensorView v = m.ddp().param(id);
    out.insert(out.end(), v.as<float>(), v.as<float>() + v.numel);
  }
  return out;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(TrainingSteps, EvaluationOfAZeroModelIsUniformOverTheVocabulary) {
  Built b = build("layer-wise");
  for (ParamId id = 0; id < b.m.model->params().size(); ++id) {
    const TensorView v = b.m.ddp().param(id);
    std::fill(v.as<float>(), v.as<float>() + v.numel, 0.0f);
  }
  // Zero weights give zero logits: every scored token costs ln(vocab) nats.
  const EvalMetrics e = evaluate_held_out(b.m.net(), *b.m.dataset, b.run.dp_group(), 7);
  EXPECT_EQ(e.step, 7);
  EXPECT_NEAR(e.eval_loss, std::log(static_cast<double>(b.m.model_config.vocab_size)), 1e-5);
}

TEST(TrainingSteps, EvaluationSplitAcrossRanksEqualsOneRankScoringEachSample) {
  Built b = build("layer-wise");
  // Larger weights make confident, sample-dependent predictions, so a lost or doubled sample
  // moves the mean (at init every sample costs about ln(vocab)).
  for (ParamId id = 0; id < b.m.model->params().size(); ++id) {
    const TensorView v = b.m.ddp().param(id);
    for (float* x = v.as<float>(); x != v.as<float>() + v.numel; ++x) *x *= 8;
  }
  const EvalMetrics e = evaluate_held_out(b.m.net(), *b.m.dataset, b.run.dp_group(), 0);
  // The reference: this rank alone, one sample at a time, over the whole held-out split.
  const TokenDataset& data = *b.m.dataset;
  const int seq = data.seq_len();
  std::vector<std::int32_t> tokens(seq), targets(seq);
  double loss = 0, correct = 0;
  for (std::int64_t i = 0; i < data.validation_size(); ++i) {
    data.fill(Split::kValidation, i, 1, tokens.data(), targets.data());
    loss += b.m.model->forward(tokens.data(), targets.data(), 1, seq);
    correct += b.m.model->exact_match().front() ? 1 : 0;
  }
  ASSERT_EQ(data.validation_size(), 50);
  EXPECT_NEAR(e.eval_loss, loss / 50, 1e-5 * loss / 50);
  EXPECT_DOUBLE_EQ(e.accuracy, correct / 50);
}

TEST(TrainingSteps, AFiniteStepUpdatesTheWeights) {
  Built b = build("distributed");
  const std::vector<float> before = all_weights(b.m);
  NonFiniteSteps nonfinite(0);
  const StepMetrics s =
      run_training_step(b.m, b.run.dp_group(), nonfinite, StepPlan{0, 0.003, 0, 4, 2});
  EXPECT_EQ(s.step, 1);
  EXPECT_FALSE(s.skipped);
  EXPECT_TRUE(std::isfinite(s.loss));
  EXPECT_GT(s.grad_norm, 0);
  EXPECT_DOUBLE_EQ(s.lr, 0.003);
  b.m.ddp().finish_all_param_sync();
  EXPECT_FALSE(same_bits(before, all_weights(b.m)));
}

TEST(TrainingSteps, ANonFiniteStepIsSkippedOnEveryRankThenRefused) {
  Built b = build("layer-wise");
  // Rank 0 alone holds a NaN embedding: every rank must still skip.
  if (b.run.groups.world->rank() == 0) {
    const TensorView v = b.m.ddp().param(0);
    std::fill(v.as<float>(), v.as<float>() + v.numel, std::numeric_limits<float>::quiet_NaN());
  }
  const std::vector<float> before = all_weights(b.m);
  NonFiniteSteps nonfinite(1);
  const StepMetrics s =
      run_training_step(b.m, b.run.dp_group(), nonfinite, StepPlan{0, 0.003, 0, 4, 2});
  EXPECT_TRUE(s.skipped);
  EXPECT_TRUE(std::isnan(s.loss));
  b.m.ddp().finish_all_param_sync();
  EXPECT_TRUE(same_bits(before, all_weights(b.m)));  // no update reached any weight
  EXPECT_THROW(run_training_step(b.m, b.run.dp_group(), nonfinite, StepPlan{1, 0.003, 8, 4, 2}),
               NonFiniteTrainingError);
}

TEST(TrainingSteps, OnStepSeesEveryStepInOrderWithTheSummarysMetrics) {
  TrainerOptions options;
  options.quiet = true;
  std::vector<StepMetrics> seen;
  options.on_step = [&](const StepMetrics& s) { seen.push_back(s); };
  const TrainingSummary summary =
      run_training(tiny_config("layer-wise"), init_mpi_world(), options);
  ASSERT_EQ(summary.steps.size(), 4u);
  ASSERT_EQ(seen.size(), summary.steps.size());
  for (std::size_t i = 0; i < seen.size(); ++i) {
    EXPECT_EQ(seen[i].step, static_cast<std::int64_t>(i + 1));
    EXPECT_EQ(seen[i].step, summary.steps[i].step);
    EXPECT_EQ(std::memcmp(&seen[i].loss, &summary.steps[i].loss, sizeof(double)), 0);
    EXPECT_EQ(seen[i].cpu_ms, summary.steps[i].cpu_ms);
  }
}

}  // namespace
}  // namespace shardwise::train_detail
