#include "engine.hpp"

#include "shardwise/comm/mpi_process_group.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/layout/layout_algorithms.hpp"

namespace shardwise::python {
namespace {

bool reduce_scatters(optim::OptimizerMode mode) {
  return mode == optim::OptimizerMode::kLayerWise || mode == optim::OptimizerMode::kDistributed;
}

// wrap_with_ddp for one chunk (the layout, config and buffers the CLI's trainer uses).
std::unique_ptr<DistributedDataParallel> wrap(ParamList params, optim::OptimizerMode mode,
                                              DistributedDataParallelConfig config,
                                              const DataParallelGroups& groups,
                                              bool all_layer_wise) {
  auto ddps = optim::wrap_with_ddp({std::move(params)}, mode, config, groups, all_layer_wise);
  return std::move(ddps.front());
}

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
      mode_(optim::parse_optimizer_mode(options.kind)) {
  DistributedDataParallelConfig config;
  config.bucket_size = options.bucket_size;
  config.overlap_grad_reduce = options.overlap_grad_reduce;
  config.grad_reduce_in_fp32 = options.grad_reduce_in_fp32;
  // Param gathers only exist with the distributed optimizers; wrap_with_ddp turns the overlap
  // off for the all-reduce modes.
  config.use_distributed_optimizer = reduce_scatters(mode_);
  config.overlap_param_gather = options.overlap_param_gather && config.use_distributed_optimizer;
  // All gathers are issued when the step ends, so waiting for one never issues another: a
  // param read on one rank only (logging, a checkpoint of rank 0) cannot reorder this rank's
  // collectives against the other ranks' (which would deadlock the next collective).
  config.align_param_gather = config.overlap_param_gather;
  ddp_ = wrap(std::move(params), mode_, config, DataParallelGroups::from(groups_),
              options.all_layer_wise);
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

void Engine::make_optimizer(const optim::MuonOptions& muon, const optim::AdamWOptions& adamw,
                            double clip_grad, bool overlap_param_gather_with_optimizer_step) {
  SW_REQUIRE(optimizer_ == nullptr, InvalidArgument,
             "make_optimizer: this DistributedDataParallel already has an optimizer");
  optimizer_ = optim::make_optimizer(mode_, {ddp_.get()}, muon, adamw, groups_.data_parallel,
                                     overlap_param_gather_with_optimizer_step);
  optimizer_->set_step_options({clip_grad, false});
}

optim::Optimizer& Engine::optimizer() const {
  SW_REQUIRE(optimizer_ != nullptr, InvalidArgument, "no optimizer: call make_optimizer first");
  return *optimizer_;
}

optim::StepResult Engine::step() {
  optim::Optimizer& opt = optimizer();
  ddp_->finish_grad_sync();
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
