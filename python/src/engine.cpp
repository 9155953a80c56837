#include "engine.hpp"

#include "shardwise/comm/mpi_process_group.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/optim/data_parallel_setup.hpp"
#include "shardwise/train/data_parallel_checkpoint.hpp"

namespace shardwise::python {
namespace {

// The world group with the watchdog set to `comm_timeout` before the engine's groups are split
// from it (they inherit it). The world is shared: the latest engine's setting applies to it.
ProcessGroupPtr world_with_comm_timeout(double comm_timeout) {
  validate_comm_timeout(comm_timeout, "comm_timeout");
  ProcessGroupPtr world = init_mpi_world();
  ProcessGroupOptions options = process_group_options(world);
  options.comm_timeout_seconds = comm_timeout;
  set_process_group_options(world, options);
  return world;
}

}  // namespace

Engine::Engine(ParamList params, const EngineOptions& options)
    : world_(world_with_comm_timeout(options.comm_timeout)),
      groups_(make_parallel_groups(world_, ParallelSizes{})),
      kind_(options.kind) {
  DistributedDataParallelConfig config;
  config.bucket_size = options.bucket_size;
  config.overlap_grad_reduce = options.overlap_grad_reduce;
  config.grad_reduce_in_fp32 = options.grad_reduce_in_fp32;
  config.reproducible_reduction = options.reproducible_reduction;
  config.symmetric_buffers = options.symmetric_buffers;
  // Param gathers only exist with the distributed optimizers; wrap_with_ddp turns the overlap
  // off for the all-reduce kinds and picks the grad sync.
  config.overlap_param_gather = options.overlap_param_gather;
  // All gathers are issued when the step ends, so waiting for one never issues another: a
  // param read on one rank only (logging, a checkpoint of rank 0) cannot reorder this rank's
  // collectives against the other ranks' (which would deadlock the next collective).
  config.align_param_gather = config.overlap_param_gather;
  auto ddps = optim::wrap_with_ddp({std::move(params)}, kind_, config,
                                   DataParallelGroups::from(groups_), options.all_layer_wise);
  ddp_ = std::move(ddps.front());
}

Engine::~Engine() {
  // Outstanding collectives write into the buffers: let them land before the buffers go.
  try {
    ddp_->finish_all_param_sync();
    ddp_->zero_grad_buffer();
  } catch (...) {
  }
}

void Engine::broadcast_params_from_rank0() {
  for (const auto& buffer : ddp_->buffers()) {
    ddp_->group_for(buffer->key())->broadcast(buffer->param_data(), 0)->wait();
  }
}

void Engine::broadcast_from_rank0(TensorView values) {
  SW_REQUIRE(values.dtype == DType::kFloat32, InvalidArgument,
             "broadcast_from_rank0: expected float32 values, got ", dtype_name(values.dtype));
  if (values.numel == 0 || groups_.data_parallel->size() == 1) return;
  groups_.data_parallel->broadcast(values, 0)->wait();
}

void Engine::gather_reduced_grads() {
  if (!ddp_->config().reduce_scatter_grads()) return;
  std::vector<WorkPtr> handles;
  for (const auto& buffer : ddp_->buffers()) {
    const ProcessGroupPtr& group = ddp_->group_for(buffer->key());
    if (group->size() == 1) continue;
    for (const Bucket& bucket : buffer->buckets()) {
      handles.push_back(group->all_gather(bucket.grad_data, bucket.grad_shard(group->rank())));
    }
  }
  for (WorkPtr& handle : handles) handle->wait();
}

void Engine::make_optimizer(const OptimizerConfig& spec) {
  SW_REQUIRE(optimizer_ == nullptr, InvalidArgument,
             "make_optimizer: this DistributedDataParallel already has an optimizer");
  SW_REQUIRE(spec.kind == kind_, InvalidArgument, "make_optimizer: kind '", to_string(spec.kind),
             "' needs another buffer layout than '", to_string(kind_),
             "', which the buffers were laid out for; wrap with DistributedDataParallel(..., "
             "optimizer='",
             to_string(spec.kind), "')");
  optimizer_ = optim::build_optimizer(spec, {ddp_.get()}, groups_.data_parallel);
}

optim::Optimizer& Engine::optimizer() const {
  SW_REQUIRE(optimizer_ != nullptr, InvalidArgument, "no optimizer: call make_optimizer first");
  return *optimizer_;
}

void Engine::register_grad_ready(ParamId id) {
  if (ddp_->is_last_microbatch()) grads_synced_ = false;
  ddp_->register_grad_ready(id);
}

void Engine::finish_grad_sync() {
  if (grads_synced_) return;
  ddp_->finish_grad_sync();
  grads_synced_ = true;
}

void Engine::zero_grad_buffer() {
  ddp_->zero_grad_buffer();
  grads_synced_ = false;
}

optim::StepResult Engine::step() {
  optim::Optimizer& opt = optimizer();
  finish_grad_sync();
  grads_synced_ = false;
  return opt.step();
}

std::vector<ModelTensor> Engine::model_tensors() const {
  std::vector<ModelTensor> out;
  const ParamList& params = ddp_->params();
  for (ParamId id = 0; id < params.size(); ++id) {
    out.push_back(ModelTensor{params[id].name, params[id].shape, ddp_->param(id)});
  }
  return out;
}

std::string Engine::save_checkpoint(CheckpointSaveRequest request) {
  request.optimizer_kind = std::string(to_string(kind_));
  return save_data_parallel_checkpoint(request, *ddp_, model_tensors(), optimizer(),
                                       *groups_.data_parallel)
      .string();
}

std::pair<std::int64_t, std::int64_t> Engine::bytes_communicated() const {
  std::pair<std::int64_t, std::int64_t> total{0, 0};
  auto add = [&total](const ProcessGroup& g) {
    const TrafficCounters t = g.traffic();
    total.first += t.total_sent();
    total.second += t.total_received();
  };
  add(*groups_.data_parallel);
  const ProcessGroupPtr& expert = groups_.expert_data_parallel;
  if (expert && expert != groups_.data_parallel) add(*expert);
  return total;
}

std::int64_t Engine::buffer_bytes() const {
  std::int64_t total = 0;
  for (const auto& b : ddp_->buffers()) {
    total += static_cast<std::int64_t>(b->param_data().nbytes() + b->grad_data().nbytes());
  }
  return total;
}

}  // namespace shardwise::python
