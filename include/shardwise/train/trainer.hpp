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
  // CPU time of this process during the step, all threads (step_ms is wall time): on a machine
  // shared with other jobs it leaves out the time they took.
  double cpu_ms = 0;
  // Share of this step's gradient collectives that ran while backward was still computing.
  double comm_hidden_fraction = 0;
  // Where the wall time went: forward + backward of every micro-batch (waits for param gathers
  // inside forward included), then the wait for the last gradient collectives, then the
  // optimizer step. exposed_ms = step_ms - compute_ms: what the step costs beyond computing the
  // gradients (grad sync not hidden by backward, the optimizer and its param gathers).
  double compute_ms = 0;
  double grad_sync_wait_ms = 0;
  double optimizer_ms = 0;
  double exposed_ms = 0;
  // Bucket groups whose grad collective had been dispatched before the trainer entered
  // finish_grad_sync (during backward: overlap_grad_reduce); the rest are dispatched there.
  int groups_dispatched_in_backward = 0;
  // The loss or grad norm was not finite: no update was applied (training.skip_nonfinite_steps).
  bool skipped = false;
};

struct EvalMetrics {
  std::int64_t step = 0;
  double eval_loss = 0;
  double accuracy = 0;  // exact match over held-out samples
  // Language-model data only (see train/eval_report.hpp): exp(eval_loss), and eval_loss in bits
  // when tokens are bytes.
  std::optional<double> perplexity;
  std::optional<double> bits_per_byte;
};

struct TrainingSummary {
  std::vector<StepMetrics> steps;
  std::vector<EvalMetrics> evals;
  double final_loss = 0;
  std::optional<EvalMetrics> final_eval;
  double wall_seconds = 0;
  std::int64_t parameters = 0;
  std::int64_t bytes_communicated = 0;   // this rank, all groups
  int bucket_groups = 0;                 // of the DDP the run used
  std::int64_t start_step = 0;           // > 0 when resumed from a checkpoint of that step
  std::vector<std::string> checkpoints;  // step directories saved by this run, in order
};

// What a caller gets to see of the trained model when the run ends (after the last param sync,
// so every rank holds every parameter): the model's params in forward order and their values,
// views into the DDP param buffers (valid only during the callback).
struct TrainedModel {
  const ParamList& params;
  const std::vector<TensorView>& values;
  const ProcessGroup& data_parallel;
};

// Rank 0's progress bar (redrawn at most a few times per second): kAuto draws it when
// logging.progress is on and stdout is the user's terminal (not a file or pipe, nor a rank's
// pseudo-terminal under mpirun); kOn always; kOff never. Without the bar, a line is logged every
// logging.log_interval steps.
enum class ProgressMode { kAuto, kOn, kOff };

struct TrainerOptions {
  std::string log_jsonl;  // overrides logging.jsonl_path when set
  std::string plot;       // overrides logging.plot_path when set
  bool quiet = false;     // no per-step lines (tests)
  ProgressMode progress = ProgressMode::kAuto;
  // Called on every rank once training and the final evaluation are done.
  std::function<void(const TrainedModel&)> on_finish;
  // Called on every rank after each step, once it is logged (and evaluated / saved where the
  // config says so), with that step's metrics: progress reporting, or work that must run between
  // steps. The next step starts when it returns; time spent in it is in no step's metrics.
  std::function<void(const StepMetrics&)> on_step;
  // Overrides the resolved optimizer.overlap_param_gather_with_optimizer_step (the config's
  // optimizer section sets it too; comm_overlap's key needs an interleaved pipeline, which this
  // data-parallel trainer does not run). Benchmarks use it to compare both on one config.
  std::optional<bool> overlap_param_gather_with_optimizer_step;
  // Checkpoints (see checkpoint/checkpoint.hpp). save_dir: save under this root every
  // save_interval steps (0: only after the last step) and after the last step, keeping the newest
  // keep_last (0: all). load_dir: resume from load_dir/latest, load_dir/step-S (load_step) or a
  // step directory; the run continues at the saved step and data position.
  std::string save_dir;
  std::int64_t save_interval = 0;
  int keep_last = 0;
  std::string load_dir;
  std::optional<std::int64_t> load_step;
};

// Runs the whole training job on this rank. Every rank of `world` must call it with the same
// config. Throws shardwise::Error for bad input. Before any work it checks that every output path
// is writable, that the model fits in available memory (train/memory_estimate.hpp) and takes the
// save_dir's lock (checkpoint/checkpoint_root_lock.hpp) for the whole run; a NaN/inf loss or grad
// norm skips the step (training.skip_nonfinite_steps) or throws NonFiniteTrainingError, and a
// checkpoint is never saved from non-finite weights. Every rank reaches the same outcome.
TrainingSummary run_training(const TrainingConfig& config, const ProcessGroupPtr& world,
                             const TrainerOptions& options = {});

}  // namespace shardwise
