// The training loop behind `shardwise train`: builds the dataset, the GPT model, DDP buffers with
// the optimizer's layout and the optimizer from a TrainingConfig, then runs warm-up + cosine LR,
// gradient accumulation, overlapped grad reduce-scatter during backward, the optimizer step with
// its param all-gather, periodic held-out evaluation, and logging (rank 0: lines or a progress
// bar, JSONL metrics, an SVG loss plot).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "shardwise/comm/process_group.hpp"
#include "shardwise/config/training_config.hpp"
#include "shardwise/layout/param_info.hpp"

namespace shardwise {

struct StepMetrics {
  std::int64_t step = 0;  // 1-based
  double loss = 0;        // mean over the global batch
  double grad_norm = 0;
  double lr = 0;
  double tokens_per_s = 0;
  double step_ms = 0;
  // Share of this step's gradient collectives that ran while backward was still computing.
  double comm_hidden_fraction = 0;
};

struct EvalMetrics {
  std::int64_t step = 0;
  double eval_loss = 0;
  double accuracy = 0;  // exact match over held-out samples
};

struct TrainingSummary {
  std::vector<StepMetrics> steps;
  std::vector<EvalMetrics> evals;
  double final_loss = 0;
  std::optional<EvalMetrics> final_eval;
  double wall_seconds = 0;
  std::int64_t parameters = 0;
  std::int64_t bytes_communicated = 0;  // this rank, all groups
};

// What a caller gets to see of the trained model when the run ends (after the last param sync,
// so every rank holds every parameter): the model's params in forward order and their values,
// views into the DDP param buffers (valid only during the callback).
struct TrainedModel {
  const ParamList& params;
  const std::vector<TensorView>& values;
  const ProcessGroup& data_parallel;
};

struct TrainerOptions {
  std::string log_jsonl;  // overrides logging.jsonl_path when set
  std::string plot;       // overrides logging.plot_path when set
  bool quiet = false;     // no per-step lines (tests)
  // Called on every rank once training and the final evaluation are done.
  std::function<void(const TrainedModel&)> on_finish;
};

// Runs the whole training job on this rank. Every rank of `world` must call it with the same
// config. Throws shardwise::Error for bad input.
TrainingSummary run_training(const TrainingConfig& config, const ProcessGroupPtr& world,
                             const TrainerOptions& options = {});

}  // namespace shardwise
