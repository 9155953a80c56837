// Engine: one model's DDP buffers and optimizer on this rank, as the Python front end drives
// them. It owns the world group, the DistributedDataParallel (laid out by wrap_with_ddp for the
// optimizer kind, known from the start) and, once make_optimizer ran, the optimizer that
// optim::build_optimizer builds from the spec (the trainer's builder); numpy views handed to
// Python keep the Engine alive.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "shardwise/checkpoint/checkpoint.hpp"
#include "shardwise/comm/comm_deadline.hpp"
#include "shardwise/comm/process_group.hpp"
#include "shardwise/config/optimizer_config.hpp"
#include "shardwise/ddp/distributed_data_parallel.hpp"
#include "shardwise/optim/data_parallel_setup.hpp"

namespace shardwise::python {

struct EngineOptions {
  // Decides the layout and the grad sync; make_optimizer's spec must name the same kind.
  OptimizerKind kind = kDefaultOptimizerConfig.kind;
  std::optional<std::int64_t> bucket_size;
  bool overlap_grad_reduce = true;
  bool overlap_param_gather = true;
  bool grad_reduce_in_fp32 = true;
  bool all_layer_wise = false;
  // ddp.reproducible_reduction: the grads are summed in one fixed tree over the global
  // micro-batches, so every power-of-two dp gives the same bits (docs/reproducible_reduction.md).
  bool reproducible_reduction = false;
  // ddp.symmetric_buffers: the param and grad buffers in memory every rank of the node maps, so
  // the buffer collectives read the peers' buckets in place (docs/collectives.md).
  bool symmetric_buffers = true;
  // The collective watchdog (seconds): a collective or wait that has not completed by then names
  // the group and peer it waited for and aborts the job (exit 3), as `train --comm-timeout`.
  double comm_timeout = kDefaultCommTimeoutSeconds;
};

class Engine {
 public:
  Engine(ParamList params, const EngineOptions& options);
  ~Engine();

  int rank() const { return world_->rank(); }
  int world_size() const { return world_->size(); }
  OptimizerKind kind() const { return kind_; }
  DistributedDataParallel& ddp() const { return *ddp_; }
  const ProcessGroupPtr& data_parallel_group() const { return groups_.data_parallel; }

  // Copies rank 0's param buffers to every rank of the data-parallel groups (models are often
  // initialised with different seeds per rank).
  void broadcast_params_from_rank0();
  // Copies rank 0's `values` (float32) to every rank of the data-parallel group, in place
  // (module buffers such as BatchNorm running statistics).
  void broadcast_from_rank0(TensorView values);
  // After finish_grad_sync with reduce-scattered grads, each rank's shard of every bucket holds
  // the reduced gradient: all-gathers the shards in place so the whole grad buffer holds it, as
  // after an all-reduce. A no-op for the kinds whose grads are all-reduced.
  void gather_reduced_grads();

  // The spec's optimizer over the buffers; InvalidArgument when spec.kind is not the kind the
  // buffers were laid out for, or when there is an optimizer already.
  void make_optimizer(const OptimizerConfig& spec);
  bool has_optimizer() const { return optimizer_ != nullptr; }
  optim::Optimizer& optimizer() const;

  // Grad sync as the front end drives it: a grad registered after a sync starts a new one on the
  // buffer's contents (torch's repeated backward()); finish_grad_sync reduces once per sync, so
  // the step after a backward that already synced does not reduce the reduced grads again.
  void register_grad_ready(ParamId id);
  void finish_grad_sync();
  void zero_grad_buffer();

  // finish_grad_sync (unless done), then the optimizer step (which all-gathers the updated
  // params).
  optim::StepResult step();

  std::vector<ModelTensor> model_tensors() const;
  // The trainer's checkpoint save (waits for param gathers, refuses non-finite weights);
  // request.optimizer_kind is set here. Returns the step directory.
  std::string save_checkpoint(CheckpointSaveRequest request);
  // (bytes sent, bytes received) by this rank over its data-parallel groups so far.
  std::pair<std::int64_t, std::int64_t> bytes_communicated() const;
  std::int64_t buffer_bytes() const;  // param + grad buffers of this rank

 private:
  ProcessGroupPtr world_;
  ParallelGroups groups_;
  OptimizerKind kind_;
  std::unique_ptr<DistributedDataParallel> ddp_;
  std::unique_ptr<optim::Optimizer> optimizer_;
  bool grads_synced_ = false;  // finish_grad_sync ran and no grad was registered since
};

}  // namespace shardwise::python
