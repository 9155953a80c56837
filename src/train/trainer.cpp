// run_training, read top to bottom: each line names one step of the run; the steps live in the
// files listed in training_run.hpp.
#include "shardwise/train/trainer.hpp"

#include <chrono>

#include "shardwise/train/lr_schedule.hpp"
#include "shardwise/train/nonfinite_steps.hpp"
#include "tensor_parallel_checkpoint.hpp"
#include "trainer_guards.hpp"
#include "training_report.hpp"
#include "training_run.hpp"

namespace shardwise {

namespace {

using namespace train_detail;
using Clock = std::chrono::steady_clock;

void count_model(TrainingSummary& summary, const TrainingModel& m) {
  for (const auto& p : m.model->params()) summary.parameters += p.numel();
  summary.bucket_groups = static_cast<int>(m.ddp().bucket_groups().size());
}

std::int64_t bytes_moved(const std::vector<const ProcessGroup*>& groups) {
  std::int64_t total = 0;
  for (const ProcessGroup* group : groups) {
    const TrafficCounters t = group->traffic();
    total += t.total_sent() + t.total_received();
  }
  return total;
}

bool saves_after(std::int64_t step, const TrainerOptions& options, std::int64_t steps) {
  if (options.save_dir.empty()) return false;
  return (options.save_interval > 0 && step % options.save_interval == 0) || step == steps;
}

// Lets the caller see the trained weights (every rank holds all of them after the last sync;
// a tensor-parallel run gathers them over its TP group: the caller sees the tp = 1 model).
void hand_over(TrainingModel& m, const RunContext& run, const TrainerOptions& options,
               ProcessGroup& dp_group) {
  if (!options.on_finish) return;
  if (m.device) m.pull_from_device();
  if (run.tp > 1) {
    FullWeights full = gather_full_weights(m, run);
    std::vector<TensorView> values;
    for (const ModelTensor& t : full.tensors()) values.push_back(t.values);
    options.on_finish(TrainedModel{full.params, values, dp_group});
    return;
  }
  std::vector<TensorView> values;
  for (ParamId id = 0; id < m.model->params().size(); ++id) values.push_back(m.ddp().param(id));
  options.on_finish(TrainedModel{m.model->params(), values, dp_group});
}

}  // namespace

TrainingSummary run_training(const TrainingConfig& input_config, const ProcessGroupPtr& world,
                             const TrainerOptions& options) {
  const auto t_start = Clock::now();
  const RunContext run = build_parallel_state(input_config, world, options);
  // Before any work: every output writable, the --save root ours alone (held until we return).
  const auto save_root_lock =
      prepare_outputs(*world, {options.save_dir, run.jsonl, run.plot}, run.verbose);
  TrainingModel m = build_model_and_data(run, *world);
  build_ddp_and_optimizer(m, run);
  ProcessGroup& dp_group = run.dp_group();

  TrainingSummary summary;
  count_model(summary, m);
  announce_run(run, m, summary);
  TrainingReport report(run);
  const TrainingConfig& config = run.config;
  const std::int64_t steps = config.training.steps;
  std::int64_t consumed_samples = 0;
  if (const auto resumed = resume_from_checkpoint(m, run, options)) {
    summary.start_step = resumed->step;
    consumed_samples = resumed->consumed_samples;
    report.resumed(*resumed);
  }
  auto evaluate = [&](std::int64_t step) {
    // The params' all-gathers finish here, on every rank: a rank with no held-out samples (fewer
    // than dp) runs no forward, which is where they would finish, and the others waited for it.
    m.step_ddp().finish_all_param_sync();
    summary.evals.push_back(evaluate_held_out(m.net(), *m.dataset, dp_group, step));
    report.eval(summary.evals.back());
    try {
      require_finite_eval(summary.evals.back());
    } catch (const NonFiniteTrainingError& e) {
      report.stopped(step, e.what());
      throw;
    }
    return summary.evals.back();
  };

  const LrScheduleParams schedule{config.optimizer.lr, config.optimizer.min_lr,
                                  config.training.warmup_steps, steps,
                                  config.training.lr_schedule == LrSchedule::kCosine};
  NonFiniteSteps nonfinite(config.training.skip_nonfinite_steps);
  for (std::int64_t step = summary.start_step; step < steps; ++step) {
    const StepPlan plan{step, learning_rate_at(schedule, step), consumed_samples,
                        config.training.micro_batch_size, config.training.grad_accumulation};
    try {
      summary.steps.push_back(run_training_step(m, dp_group, nonfinite, plan));
    } catch (const NonFiniteTrainingError& e) {
      report.stopped(step + 1, e.what());  // the log ends with the (1-based) step that stopped it
      throw;
    }
    consumed_samples += run.global_batch;
    const StepMetrics& s = summary.steps.back();
    report.step(s);
    // Evaluations come before the save of the same step, the last step's too: a state whose
    // held-out loss is NaN or inf stops the run unsaved (require_finite_eval).
    const std::int64_t interval = config.training.eval_interval;
    if (s.step == steps || (interval > 0 && s.step % interval == 0)) evaluate(s.step);
    if (saves_after(s.step, options, steps)) {
      summary.checkpoints.push_back(
          save_training_checkpoint(m, run, options, s.step, consumed_samples));
      report.checkpoint_saved(summary.checkpoints.back());
    }
    if (options.on_step) options.on_step(s);
  }
  m.step_ddp().finish_all_param_sync();
  summary.final_loss = summary.steps.empty() ? 0 : summary.steps.back().loss;
  // A resumed run with no step left to train has not evaluated yet.
  const bool evaluated = !summary.evals.empty() && summary.evals.back().step == steps;
  summary.final_eval = evaluated ? summary.evals.back() : evaluate(steps);
  summary.wall_seconds = std::chrono::duration<double>(Clock::now() - t_start).count();
  std::vector<const ProcessGroup*> comm_groups = data_parallel_comm_groups(m, dp_group);
  // The TP layers' collectives too: a tp = 2, dp = 1 run said "0 bytes communicated".
  if (run.tp > 1) comm_groups.push_back(&run.tp_group());
  summary.bytes_communicated = bytes_moved(comm_groups);
  hand_over(m, run, options, dp_group);
  report.finish(summary, m);
  return summary;
}

}  // namespace shardwise
