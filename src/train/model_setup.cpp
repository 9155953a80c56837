// Trainer steps 2 and 3: the data and the model, then DDP buffers and the optimizer over them.
#include <map>
#include <memory>
#include <set>
#include <string>

#include "shardwise/core/error.hpp"
#include "shardwise/tp/overlap_plan.hpp"
#include "shardwise/train/model_from_config.hpp"
#include "trainer_guards.hpp"
#include "training_run.hpp"

namespace shardwise::train_detail {
namespace {

// The model's TP group and sequence parallelism. The one place where the resolved TP comm-overlap
// config (run.resolution.tp_comm_overlap / tp_comm_overlap_cfg) becomes the model's overlap plan.
TensorParallelOptions tensor_parallel_options(const RunContext& run) {
  TensorParallelOptions tp;
  tp.group = run.tp > 1 ? &run.tp_group() : nullptr;
  tp.sequence_parallel = run.config.parallel.sequence_parallel;
  // The resolved tp_comm_overlap_cfg picks each GEMM slot's algorithm; a disabled plan (tp = 1,
  // no sequence parallelism, overlap off) runs the plain TP path.
  tp.overlap = std::make_shared<const tp::TpOverlapPlan>(tp::tp_overlap_plan(run.resolution));
  return tp;
}

// Muon orthogonalises every TP-sharded matrix whole (gathered over the TP group).
std::map<std::string, optim::TensorParallelSplit> muon_tensor_parallel_splits(
    const GptModel<float>& model, const RunContext& run) {
  std::map<std::string, optim::TensorParallelSplit> out;
  for (const ParamInfo& p : model.params()) {
    if (p.is_2d() && p.is_tp_partitioned()) {
      out[p.name] = optim::TensorParallelSplit{&run.tp_group(), p.tp_partition_dim, p.tp_stride};
    }
  }
  return out;
}

// The grad norm sums over DP (each element once) and then over TP; a TP duplicate (held whole by
// every TP rank, with equal grads) is counted by TP rank 0 only, so it enters the norm once.
void count_tensor_parallel_grads_once(optim::Optimizer& optimizer, const GptModel<float>& model,
                                      OptimizerKind kind, const RunContext& run) {
  std::set<std::string> duplicates;
  for (const ParamInfo& p : model.params()) {
    if (p.tp_duplicate) duplicates.insert(p.name);
  }
  if (run.tp_rank != 0) optimizer.exclude_from_grad_stats(duplicates);
  ProcessGroup* dp = &run.dp_group();
  ProcessGroup* tp = &run.tp_group();
  // In 'ddp' mode every DP rank holds every grad: its local figures are already the DP total.
  const bool over_dp = shards_optimizer_state(kind);
  optimizer.set_world_reduce([dp, tp, over_dp](double local) {
    const double dp_total = over_dp ? optim::all_reduce_sum_exact(*dp, local) : local;
    return optim::all_reduce_sum_exact(*tp, dp_total);
  });
}

}  // namespace

TrainingModel build_model_and_data(const RunContext& run, ProcessGroup& world) {
  TrainingModel m;
  check_on_every_rank(
      world, [&] { m.dataset = make_token_dataset(run.config); },
      "the training data could not be read");
  require_same_data_on_every_rank(world, *m.dataset, run.config.data);
  m.model_config = gpt_config_for(run.config, *m.dataset);
  m.kind = run.config.optimizer.kind;
  // Distributed optimizers hold 1/dp of the state per rank; plain DDP holds all of it.
  require_memory(world, m.model_config, run.config, shards_optimizer_state(m.kind) ? run.dp : 1);
  require_training_device(m, run, world);
  m.model = std::make_unique<GptModel<float>>(m.model_config, tensor_parallel_options(run));
  return m;
}

void build_ddp_and_optimizer(TrainingModel& m, const RunContext& run) {
  GptModel<float>& model = *m.model;
  m.ddps = optim::wrap_with_ddp({model.params()}, m.kind, run.config.ddp,
                                DataParallelGroups::from(run.groups));
  DistributedDataParallel& ddp = m.ddp();
  std::vector<float*> values, grads;
  for (ParamId id = 0; id < model.params().size(); ++id) {
    values.push_back(ddp.param(id).as<float>());
    grads.push_back(ddp.main_grad(id).as<float>());
  }
  model.bind(std::move(values), std::move(grads));
  model.init_parameters(static_cast<std::uint64_t>(run.config.model.seed));
  m.host_model = trainable(model);
  m.optimizer =
      optim::build_optimizer(run.config.optimizer, {&ddp}, run.groups.data_parallel,
                             run.tp > 1 ? muon_tensor_parallel_splits(model, run)
                                        : std::map<std::string, optim::TensorParallelSplit>{});
  if (run.tp > 1) count_tensor_parallel_grads_once(*m.optimizer, model, m.kind, run);
  if (ddp.config().overlap_param_gather) {
    // Forward waits for a param's all-gather only when it first reads that param.
    model.set_before_param_use(
        [&ddp](ParamId id) { ddp.finish_param_sync(ddp.bucket_group_of(id)); });
  }
  build_device_training(m, run);
}

std::vector<ModelTensor> model_tensors(const TrainingModel& m) {
  std::vector<ModelTensor> out;
  const ParamList& params = m.model->params();
  for (ParamId id = 0; id < params.size(); ++id) {
    out.push_back(ModelTensor{params[id].name, params[id].shape, m.ddp().param(id)});
  }
  return out;
}

}  // namespace shardwise::train_detail
