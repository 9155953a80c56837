// Trainer step 5: one optimizer step — micro-batches with grad accumulation (DDP dispatches each
// bucket group's reduce-scatter as backward finishes it), the wait for the rest of the grad sync,
// and the optimizer step, or a skipped step when the loss or grad norm is not finite.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <vector>

#include "shardwise/core/cpu_time.hpp"
#include "training_run.hpp"

namespace shardwise::train_detail {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Time the groups spent in gradient collectives so far.
double grad_comm_seconds(const std::vector<const ProcessGroup*>& groups) {
  double total = 0;
  for (const ProcessGroup* group : groups) {
    for (const auto& [kind, seconds] : group->traffic().busy_seconds) {
      if (kind == CollectiveKind::kReduceScatter || kind == CollectiveKind::kAllReduce) {
        total += seconds;
      }
    }
  }
  return total;
}

// Forward and backward over this rank's micro-batches; returns each one's loss. Micro-batch
// `micro` of rank `rank` holds the step's global micro-batch micro * dp + rank.
std::vector<double> accumulate_gradients(TrainingModel& m, const StepPlan& plan, int dp, int rank) {
  DistributedDataParallel& ddp = m.step_ddp();
  const int mbs = plan.micro_batch_size, accum = plan.grad_accumulation;
  const int seq = m.dataset->seq_len();
  std::vector<std::int32_t> tokens(static_cast<std::size_t>(mbs) * seq),
      targets(static_cast<std::size_t>(mbs) * seq);
  std::vector<double> losses;
  for (int micro = 0; micro < accum; ++micro) {
    ddp.set_is_last_microbatch(micro == accum - 1);
    const std::int64_t first = plan.first_sample + (std::int64_t{micro} * dp + rank) * mbs;
    m.dataset->fill(Split::kTrain, first, mbs, tokens.data(), targets.data());
    losses.push_back(m.net().forward(tokens.data(), targets.data(), mbs, seq));
    // The reproducible reduction sums raw micro-batch grads in its fixed order and divides by
    // the global micro-batch count once; 1/accum here would round differently at each dp.
    const bool reproducible = ddp.config().reproducible_reduction;
    m.net().backward(reproducible ? 1.0 : 1.0 / accum,
                     [&ddp](ParamId id) { ddp.register_grad_ready(id); });
    if (reproducible && micro + 1 < accum) ddp.close_microbatch();
  }
  return losses;
}

// The step's loss: the mean over its global micro-batches, added in global order. The same
// global batch then gives the same bits at any dp / accumulation split (a checkpoint resumed at
// another dp reports exactly the loss the saving run did).
double global_mean_loss(ProcessGroup& dp_group, const std::vector<double>& local_losses) {
  const std::vector<double> all = optim::all_gather_exact(dp_group, local_losses);
  const int dp = dp_group.size();
  const auto accum = static_cast<int>(local_losses.size());
  double sum = 0;
  for (int micro = 0; micro < accum; ++micro) {
    for (int rank = 0; rank < dp; ++rank)
      sum += all[static_cast<std::size_t>(rank) * accum + micro];
  }
  return sum / (static_cast<double>(dp) * accum);
}

int groups_dispatched(const DistributedDataParallel& ddp) {
  int n = 0;
  for (const auto& group : ddp.bucket_groups()) n += group->grad_sync_dispatched() ? 1 : 0;
  return n;
}

}  // namespace

std::vector<const ProcessGroup*> data_parallel_comm_groups(const TrainingModel& m,
                                                           const ProcessGroup& dp_group) {
  std::vector<const ProcessGroup*> groups{&dp_group};
  const auto add = [&groups](const ProcessGroupPtr& g) {
    if (g != nullptr && std::find(groups.begin(), groups.end(), g.get()) == groups.end()) {
      groups.push_back(g.get());
    }
  };
  for (const auto& buffer : m.step_ddp().buffers()) {
    add(m.step_ddp().group_for(buffer->key()));
    add(m.step_ddp().replica_group_for(buffer->key()));
  }
  return groups;
}

StepMetrics run_training_step(TrainingModel& m, ProcessGroup& dp_group, NonFiniteSteps& nonfinite,
                              const StepPlan& plan) {
  const auto t0 = Clock::now();
  const double cpu0 = process_cpu_seconds();
  const int dp = dp_group.size();
  DistributedDataParallel& ddp = m.step_ddp();
  m.step_optimizer().set_lr(plan.lr);
  ddp.zero_grad_buffer();
  const std::vector<const ProcessGroup*> comm_groups = data_parallel_comm_groups(m, dp_group);
  const double busy_before = grad_comm_seconds(comm_groups);
  const std::vector<double> local_losses = accumulate_gradients(m, plan, dp, dp_group.rank());
  StepMetrics s;
  s.compute_ms = seconds_since(t0) * 1e3;
  s.step = plan.step + 1;
  s.lr = plan.lr;
  s.groups_dispatched_in_backward = groups_dispatched(ddp);
  const auto t_wait = Clock::now();
  ddp.finish_grad_sync();
  const double exposed = seconds_since(t_wait);
  s.grad_sync_wait_ms = exposed * 1e3;
  const double comm = grad_comm_seconds(comm_groups) - busy_before;
  s.loss = global_mean_loss(dp_group, local_losses);
  // A non-finite loss never reaches the optimizer; a non-finite grad norm makes it skip the
  // update. Either way the step is skipped (within the allowance) or the run stops here.
  s.grad_norm = std::numeric_limits<double>::quiet_NaN();
  const auto t_step = Clock::now();
  if (std::isfinite(s.loss)) s.grad_norm = m.step_optimizer().step().grad_norm;
  s.optimizer_ms = seconds_since(t_step) * 1e3;
  s.skipped = nonfinite.skip_step(dp_group, s.step, s.loss, s.grad_norm);
  s.step_ms = seconds_since(t0) * 1e3;
  s.exposed_ms = s.step_ms - s.compute_ms;
  s.cpu_ms = (process_cpu_seconds() - cpu0) * 1e3;
  const std::int64_t global_batch =
      std::int64_t{plan.micro_batch_size} * plan.grad_accumulation * dp;
  s.tokens_per_s = static_cast<double>(global_batch * m.dataset->seq_len()) / (s.step_ms / 1e3);
  s.comm_hidden_fraction = comm > 0 ? std::clamp(1.0 - exposed / comm, 0.0, 1.0) : 0.0;
  return s;
}

}  // namespace shardwise::train_detail
