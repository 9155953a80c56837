// DistributedOptimizer (ZeRO-1 over the element-sharded DistOpt layout): each rank owns 1/dp of
// every bucket of the buffers it manages, keeps fp32 main params and AdamW state for exactly
// those elements (params that straddle shards are split element-exactly), steps them from the
// reduce-scattered grad shard, writes them into its shard of the param buffer and starts the
// in-place all-gather of its own bucket groups.
#pragma once

#include <functional>
#include <memory>

#include "shardwise/ddp/distributed_data_parallel.hpp"
#include "shardwise/optim/adamw.hpp"
#include "shardwise/optim/main_params.hpp"

namespace shardwise::optim {

using BufferSelector = std::function<bool(const BufferKey&)>;

class DistributedOptimizer : public Optimizer {
 public:
  // Manages the buffers `manages` accepts. The DDP must reduce-scatter its grads.
  DistributedOptimizer(DistributedDataParallel& ddp, BufferSelector manages,
                       AdamWOptions options);

  std::string_view kind() const override { return "distributed"; }
  bool step_with_ready_grads() override;
  OptimizerState state_dict() const override { return adamw_->state_dict(); }
  void load_state_dict(const OptimizerState& state) override;
  void set_lr(double lr) override;

  // The element slices this rank owns (for checkpoints: name, offset, count).
  const std::vector<OwnedSlice>& owned_slices() const { return main_.slices(); }
  // Starts (or, without overlap_param_gather, completes) the all-gather of the managed buffers.
  void start_param_sync();

 private:
  static std::vector<OwnedSlice> local_slices(const DistributedDataParallel& ddp,
                                              const BufferSelector& manages);

  DistributedDataParallel& ddp_;
  BufferSelector manages_;
  MainParams main_;
  std::unique_ptr<AdamW> adamw_;
};

}  // namespace shardwise::optim
