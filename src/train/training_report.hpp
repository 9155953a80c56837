// Internal to the trainer, step 8: everything the run reports while it goes — rank 0's console
// lines or progress bar, the JSONL metrics, and at the end the SVG loss plot. Other ranks and
// quiet runs report nothing (the summary run_training returns is the same either way).
#pragma once

#include <cstdint>
#include <string>

#include "progress_bar.hpp"
#include "shardwise/train/metrics_log.hpp"
#include "training_run.hpp"

namespace shardwise::train_detail {

// The lines that say what is about to run: data, model, parallel layout, resolved overlap.
void announce_run(const RunContext& run, const TrainingModel& m, const TrainingSummary& summary);

class TrainingReport {
 public:
  // Opens the JSONL log (rank 0) and decides between progress bar and log lines.
  explicit TrainingReport(const RunContext& run);

  void resumed(const ResumePoint& point);
  void step(const StepMetrics& s);
  void eval(const EvalMetrics& e);
  void checkpoint_saved(const std::string& directory);
  // Records (JSONL) the step at which the run stops on a non-finite state, with the reason.
  void stopped(std::int64_t step, const std::string& reason);
  // Closes the metrics log, writes the loss plot and the closing line.
  void finish(const TrainingSummary& summary, const TrainingModel& m);

 private:
  void end_progress_line();

  const RunContext& run_;
  MetricsLog metrics_;
  ProgressBar progress_;
};

}  // namespace shardwise::train_detail
