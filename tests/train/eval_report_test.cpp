// Evaluation figures by kind of data: language-model data gets perplexity and (byte-level) bits
// per byte in the summary, the JSONL record and the log line; synthetic tasks keep exact match.
#include "shardwise/train/eval_report.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "scratch_dir.hpp"
#include "shardwise/comm/mpi_process_group.hpp"
#include "shardwise/train/synthetic_task.hpp"
#include "shardwise/train/token_file_dataset.hpp"

namespace shardwise {
namespace {

std::vector<std::int32_t> ramp(int n, int vocab) {
  std::vector<std::int32_t> out(n);
  for (int i = 0; i < n; ++i) out[i] = i % vocab;
  return out;
}

TEST(EvalReport, Conversions) {
  EXPECT_DOUBLE_EQ(bits_from_nats(std::log(2.0)), 1.0);
  EXPECT_DOUBLE_EQ(bits_from_nats(std::log(256.0)), 8.0);  // uniform over bytes: 8 bits/byte
  EXPECT_DOUBLE_EQ(perplexity_from_loss(std::log(7.0)), 7.0);
}

TEST(EvalReport, FiguresFollowTheKindOfData) {
  EvalMetrics text{10, std::log(4.0), 0.0, {}, {}};
  add_language_model_metrics(text, TokenFileDataset(ramp(200, 256), {}, 8, 256, 1, 4, "bytes"));
  EXPECT_DOUBLE_EQ(*text.perplexity, 4.0);
  EXPECT_DOUBLE_EQ(*text.bits_per_byte, 2.0);
  const auto record = eval_record(text);
  EXPECT_DOUBLE_EQ(record.at("val_bits_per_byte").get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(record.at("val_perplexity").get<double>(), 4.0);
  EXPECT_TRUE(record.contains("accuracy"));  // the existing fields stay
  EXPECT_EQ(eval_summary(text).find("exact-match"), std::string::npos);
  EXPECT_NE(eval_summary(text).find("2 bits/byte, perplexity 4"), std::string::npos)
      << eval_summary(text);

  // A subword vocabulary: perplexity, but no bits per byte.
  EvalMetrics subword{10, std::log(4.0), 0.0, {}, {}};
  add_language_model_metrics(subword,
                             TokenFileDataset(ramp(200, 1000), {}, 8, 1000, 1, 4, "subword"));
  EXPECT_TRUE(subword.perplexity.has_value());
  EXPECT_FALSE(subword.bits_per_byte.has_value());
  EXPECT_FALSE(eval_record(subword).contains("val_bits_per_byte"));

  EvalMetrics task{10, 0.5, 0.25, {}, {}};
  add_language_model_metrics(task, SyntheticTaskDataset(SyntheticTaskKind::kAddition, 2, 1, 8));
  EXPECT_FALSE(task.perplexity || task.bits_per_byte);
  EXPECT_FALSE(eval_record(task).contains("val_perplexity"));
  EXPECT_NE(eval_summary(task).find("exact-match accuracy 25%"), std::string::npos);
}

class EvalReportRun : public test::ScratchDirTest {};

TEST_F(EvalReportRun, TextRunWritesBitsPerByteToTheMetricsFile) {
  std::string text;
  for (int i = 0; i < 30; ++i) text += "pack my box with five dozen liquor jugs. ";
  write_all(dir_ / "corpus.txt", text);
  const TrainingConfig config = parse_training_config(
      str_cat("model: {layers: 1, hidden: 16, heads: 2, ffn: 32, seq_len: 16}\n",
              "data: {source: text, path: '", path("corpus.txt"), "', eval_samples: 8}\n",
              "training: {steps: 4, micro_batch_size: 2, warmup_steps: 1, eval_interval: 2}\n",
              "logging: {progress: false}\n"));
  TrainerOptions options;
  options.quiet = true;
  options.log_jsonl = path("metrics.jsonl");
  const TrainingSummary summary = run_training(config, init_mpi_world(), options);
  ASSERT_TRUE(summary.final_eval && summary.final_eval->bits_per_byte);
  EXPECT_DOUBLE_EQ(*summary.final_eval->bits_per_byte,
                   summary.final_eval->eval_loss / std::log(2.0));
  std::ifstream in(path("metrics.jsonl"));
  int evals = 0;
  for (std::string line; std::getline(in, line);) {
    const auto record = nlohmann::json::parse(line);
    if (!record.contains("eval_loss")) continue;
    ++evals;
    EXPECT_NEAR(record.at("val_bits_per_byte").get<double>(),
                record.at("eval_loss").get<double>() / std::log(2.0), 1e-12);
    EXPECT_NEAR(record.at("val_perplexity").get<double>(),
                std::exp(record.at("eval_loss").get<double>()), 1e-9);
  }
  EXPECT_EQ(evals, 2);  // step 2 and the final one
}

}  // namespace
}  // namespace shardwise
