// Gram Newton–Schulz chosen the way a `shardwise train` user chooses it
// (optimizer.muon_ns_algorithm in the YAML) trains the reference GPT like the standard iteration:
// the same first loss (nothing updated yet), losses within a small tolerance of the standard run's
// at every step, and weights that are not the standard run's bits (the Gram path really ran).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "shardwise/comm/mpi_process_group.hpp"
#include "shardwise/train/trainer.hpp"
#include "train/mpi/trained_param_bytes.hpp"

namespace shardwise {
namespace {

struct GramRunResult {
  TrainingSummary summary;
  std::vector<unsigned char> params;
};

GramRunResult train_with_ns_algorithm(const std::string& algorithm) {
  const TrainingConfig config = parse_training_config(str_cat(R"(
model: {layers: 2, hidden: 32, heads: 4, ffn: 64}
data: {source: synthetic, task: addition, digits: 2, eval_samples: 64}
optimizer: {kind: layer-wise, lr: 0.003, min_lr: 0.0003, muon_ns_algorithm: )",
                                                              algorithm, R"(}
training: {steps: 10, micro_batch_size: 4, warmup_steps: 2, eval_interval: 0}
logging: {progress: false}
)"));
  TrainerOptions options;
  options.quiet = true;
  GramRunResult out;
  options.on_finish = [&out](const TrainedModel& model) {
    out.params = train_test::trained_param_bytes(model);
  };
  out.summary = run_training(config, init_mpi_world(), options);
  return out;
}

TEST(GramNewtonSchulzTraining, SelectedFromTheYamlTrainsLikeTheStandardIteration) {
  const GramRunResult standard = train_with_ns_algorithm("standard");
  const GramRunResult gram = train_with_ns_algorithm("gram");
  ASSERT_EQ(standard.summary.steps.size(), gram.summary.steps.size());
  ASSERT_FALSE(gram.summary.steps.empty());
  EXPECT_EQ(standard.summary.steps.front().loss, gram.summary.steps.front().loss);
  for (std::size_t i = 0; i < gram.summary.steps.size(); ++i) {
    const double want = standard.summary.steps[i].loss;
    EXPECT_TRUE(std::isfinite(gram.summary.steps[i].loss)) << "step " << i + 1;
    EXPECT_NEAR(gram.summary.steps[i].loss, want, 1e-3 * std::abs(want)) << "step " << i + 1;
  }
  EXPECT_LT(gram.summary.steps.back().loss, gram.summary.steps.front().loss) << "the model learns";
  ASSERT_EQ(standard.params.size(), gram.params.size());
  EXPECT_TRUE(standard.params != gram.params) << "the Gram iteration was not used";
}

}  // namespace
}  // namespace shardwise
