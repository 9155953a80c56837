// Trainer step 7: a checkpoint of the run — weights, optimizer state, data position, and enough
// about the run (config, layouts, seeds) to explain it later.
#include <nlohmann/json.hpp>
#include <utility>

#include "shardwise/train/data_parallel_checkpoint.hpp"
#include "tensor_parallel_checkpoint.hpp"
#include "trainer_guards.hpp"
#include "training_run.hpp"

namespace shardwise::train_detail {
namespace {

nlohmann::ordered_json layouts_summary(const DistributedDataParallel& ddp) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const auto& buffer : ddp.buffers()) {
    out.push_back({{"buffer", buffer->key().to_string()},
                   {"numel", buffer->numel()},
                   {"numel_unpadded", buffer->numel_unpadded()},
                   {"buckets", buffer->buckets().size()},
                   {"num_shards", buffer->layout().num_shards},
                   {"shard_aligned", buffer->layout().shard_aligned}});
  }
  return out;
}

// [[first_step, global_batch], ...]: what trainer.consumed_samples is the sum of.
nlohmann::ordered_json batch_history_json(const std::vector<BatchSegment>& history) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const BatchSegment& s : history) out.push_back({s.first_step, s.global_batch});
  return out;
}

nlohmann::ordered_json run_description(const TrainingModel& m, const RunContext& run) {
  const TrainingConfig& config = run.config;
  return {{"world_size", run.world_size},
          {"global_batch", run.global_batch},
          {"rng",
           {{"model_seed", config.model.seed},
            {"data_seed", config.training.seed},
            {"note",
             "training is deterministic: the model is initialised from "
             "model_seed once and samples are a function of data_seed "
             "and the sample index (trainer.consumed_samples)"}}},
          {"batch_history", batch_history_json(m.batch_history)},
          {"layouts", layouts_summary(m.ddp())},
          // Weights and optimizer state are full (tp = 1) tensors whatever tp saved them.
          {"tensor_parallel",
           {{"tp", run.tp},
            {"sequence_parallel", config.parallel.sequence_parallel},
            {"stored", "full tensors (the tp = 1 format): loads at any tp x dp"}}},
          {"config", to_json(config)}};
}

}  // namespace

std::string save_training_checkpoint(TrainingModel& m, const RunContext& run,
                                     const TrainerOptions& options, std::int64_t step,
                                     std::int64_t consumed_samples) {
  CheckpointSaveRequest request;
  request.root = options.save_dir;
  request.step = step;
  request.consumed_samples = consumed_samples;
  request.keep_last = options.keep_last;
  request.optimizer_kind = std::string(to_string(m.kind));
  request.extra = run_description(m, run);
  if (m.device) m.pull_from_device();  // the host mirror is what a checkpoint stores
  if (run.tp > 1) {
    m.ddp().finish_all_param_sync();  // every rank (rank 0 above all) must hold the current weights
    require_finite_weights(run.dp_group(), model_tensors(m), step);
    return save_tensor_parallel_checkpoint(m, run, std::move(request));
  }
  return save_data_parallel_checkpoint(request, m.ddp(), model_tensors(m), *m.optimizer,
                                       run.dp_group())
      .string();
}

}  // namespace shardwise::train_detail
