#include "training_report.hpp"

#include <algorithm>
#include <cstdio>

#include "shardwise/core/logging.hpp"
#include "shardwise/train/eval_report.hpp"
#include "shardwise/train/log_format.hpp"
#include "shardwise/train/loss_plot.hpp"

namespace shardwise::train_detail {

namespace {

// Whether rank 0 draws the progress bar (see ProgressMode).
bool draws_progress_bar(const RunContext& run) {
  if (!run.verbose) return false;
  switch (run.progress) {
    case ProgressMode::kOn:
      return true;
    case ProgressMode::kOff:
      return false;
    case ProgressMode::kAuto:
      break;
  }
  return run.config.logging.progress && stdout_is_user_terminal();
}

}  // namespace

void announce_run(const RunContext& run, const TrainingModel& m, const TrainingSummary& summary) {
  if (!run.verbose) return;
  const GptConfig& g = m.model_config;
  const TrainingConfig& c = run.config;
  const DistributedDataParallelConfig& ddp = m.ddp().config();
  log::info("shardwise train: ", m.dataset->describe());
  log::info("model: GPT ", g.num_layers, " layers, hidden ", g.hidden, ", heads ", g.num_heads,
            ", ffn ", g.ffn_hidden, ", vocab ", g.vocab_size, ", seq ", m.dataset->seq_len(), " (",
            summary.parameters, " parameters)");
  log::info("data parallel: dp=", run.dp, ", optimizer=", to_string(m.kind), ", global batch ",
            run.global_batch, " = ", c.training.micro_batch_size, " x ",
            c.training.grad_accumulation, " x ", run.dp);
  log::info("resolved overlap: overlap_grad_reduce=", ddp.overlap_grad_reduce,
            " overlap_param_gather=", ddp.overlap_param_gather,
            " bucket_size=", ddp.bucket_size ? std::to_string(*ddp.bucket_size) : "none",
            " align_param_gather=", ddp.align_param_gather,
            " overlap_param_gather_with_optimizer_step=",
            c.optimizer.overlap_param_gather_with_optimizer_step,
            " bucket_groups=", m.ddp().bucket_groups().size());
  if (m.device) log::info("device: ", m.device->description);
  for (const auto& w : run.resolution.warnings) log::warning(w);
  for (const auto& w : m.dataset->warnings()) log::warning(w);
}

TrainingReport::TrainingReport(const RunContext& run)
    : run_(run),
      metrics_(run.jsonl, run.is_rank0),
      progress_(run.config.training.steps, draws_progress_bar(run)) {}

void TrainingReport::end_progress_line() { progress_.end_line(); }

void TrainingReport::resumed(const ResumePoint& point) {
  if (!run_.verbose) return;
  log::info("resumed from checkpoint '", point.directory, "' at step ", point.step, " (",
            point.consumed_samples, " samples consumed)");
}

void TrainingReport::stopped(std::int64_t step, const std::string& reason) {
  metrics_.write({{"step", step}, {"stopped", true}, {"error", reason}});
  metrics_.close();
}

void TrainingReport::step(const StepMetrics& s) {
  metrics_.write({{"step", s.step},
                  {"loss", s.loss},
                  {"grad_norm", s.grad_norm},
                  {"lr", s.lr},
                  {"tokens_per_s", s.tokens_per_s},
                  {"step_ms", s.step_ms},
                  {"cpu_ms", s.cpu_ms},
                  {"comm_hidden_fraction", s.comm_hidden_fraction},
                  {"compute_ms", s.compute_ms},
                  {"grad_sync_wait_ms", s.grad_sync_wait_ms},
                  {"optimizer_ms", s.optimizer_ms},
                  {"exposed_ms", s.exposed_ms},
                  {"groups_dispatched_in_backward", s.groups_dispatched_in_backward},
                  {"skipped", s.skipped}});
  if (!run_.verbose) return;
  const std::int64_t steps = run_.config.training.steps,
                     interval = run_.config.logging.log_interval;
  const std::string status = str_cat("loss ", s.loss, " | grad_norm ", s.grad_norm, " | lr ", s.lr,
                                     " | ", static_cast<long long>(s.tokens_per_s), " tok/s | ",
                                     s.step_ms, " ms | ", comm_hidden_text(s.comm_hidden_fraction));
  if (progress_.enabled()) {
    progress_.update(s.step, status);
  } else if (interval > 0 && (s.step % interval == 0 || s.step == steps)) {
    log::info("step ", s.step, "/", steps, " | ", status);
  }
}

void TrainingReport::eval(const EvalMetrics& e) {
  metrics_.write(eval_record(e));
  if (!run_.verbose) return;
  end_progress_line();
  log::info("eval step ", e.step, ": ", eval_summary(e));
}

void TrainingReport::checkpoint_saved(const std::string& directory) {
  if (!run_.verbose) return;
  end_progress_line();
  log::info("saved checkpoint '", directory, "'");
}

void TrainingReport::finish(const TrainingSummary& summary, const TrainingModel& m) {
  end_progress_line();  // a run stopped early leaves its last state undrawn
  metrics_.close();
  if (!run_.is_rank0) return;
  if (!run_.plot.empty()) {
    PlotSeries train{"train loss", {}}, eval{"held-out loss", {}, /*markers=*/true};
    for (const auto& s : summary.steps) train.points.emplace_back(s.step, s.loss);
    for (const auto& e : summary.evals) eval.points.emplace_back(e.step, e.eval_loss);
    write_loss_plot(run_.plot, {train, eval},
                    str_cat("shardwise train: ", to_string(m.kind), ", dp=", run_.dp));
  }
  if (!run_.verbose) return;
  // A resume with no step left trains none: say so, rather than a loss of 0 no step had.
  const std::string trained =
      summary.steps.empty()
          ? str_cat("no step left to train (resumed at step ", summary.start_step, ")")
          : str_cat(summary.steps.size(), " steps in ", summary.wall_seconds, " s | final loss ",
                    summary.final_loss);
  log::info("done: ", trained, " | held-out ", eval_summary(*summary.final_eval), " | ",
            summary.bytes_communicated, " bytes communicated by rank 0");
}

}  // namespace shardwise::train_detail
