// Trainer step 4: resume from a checkpoint (weights, optimizer state resharded to this run's
// layout, step and data position).
#include "shardwise/core/error.hpp"
#include "tensor_parallel_checkpoint.hpp"
#include "training_run.hpp"

namespace shardwise::train_detail {

std::optional<ResumePoint> resume_from_checkpoint(TrainingModel& m, const RunContext& run,
                                                  const TrainerOptions& options) {
  if (options.load_dir.empty()) return std::nullopt;
  const auto dir = resolve_checkpoint_directory(options.load_dir, options.load_step);
  const LoadedCheckpoint loaded =
      run.tp > 1 ? load_tensor_parallel_checkpoint(m, run, dir)
                 : load_checkpoint(dir, model_tensors(m), *m.optimizer, run.dp_group(),
                                   optim::optimizer_mode_name(m.mode));
  const std::int64_t steps = run.config.training.steps;
  SW_REQUIRE(loaded.step <= steps, ConfigError, "checkpoint '", dir.string(), "' is of step ",
             loaded.step, ", beyond training.steps (", steps, ")");
  return ResumePoint{dir.string(), loaded.step, loaded.consumed_samples};
}

}  // namespace shardwise::train_detail
