// DistributedOptimizer (ZeRO-1 over the element-sharded DistOpt layout): each rank owns 1/dp of
// every bucket of the buffers it manages, keeps fp32 main params and AdamW state for exactly
// those elements (params that straddle shards are split element-exactly), steps them from the
// reduce-scattered grad shard, writes them into its shard of the param buffer and starts the
// in-place all-gather of its own bucket groups.
//
// The step walks the managed bucket groups in forward order (the order the next forward pass
// needs them). With overlap_param_gather_with_optimizer_step each group's all-gather is
// dispatched right after that group is updated, so it runs while the optimizer updates the
// remaining groups; the updates themselves are the same either way (bitwise).
#pragma once

#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "shardwise/ddp/distributed_data_parallel.hpp"
#include "shardwise/optim/adamw.hpp"
#include "shardwise/optim/main_params.hpp"

namespace shardwise::optim {

using BufferSelector = std::function<bool(const BufferKey&)>;

// The owned slices that live in one bucket group, with their fp32 main copies.
struct BucketGroupMainParams {
  int bucket_group = 0;
  MainParams main;
};

// One entry per bucket group of a buffer `manages` accepts (also those holding none of `slices`),
// in forward order; each slice goes to the group holding its param, keeping the slices' order.
std::vector<BucketGroupMainParams> split_by_bucket_group(const DistributedDataParallel& ddp,
                                                         const BufferSelector& manages,
                                                         const std::vector<OwnedSlice>& slices,
                                                         const ShardMathPtr& math);

// The OptimParams of the selected slices, in the order of `slices`, viewing the main copies
// held by `groups` (built from the same slices).
std::vector<OptimParam> optim_params_in_slice_order(
    std::vector<BucketGroupMainParams>& groups, const std::vector<OwnedSlice>& slices,
    const std::function<bool(const OwnedSlice&)>& select);

// After each group's gather was dispatched by the step: without overlap_param_gather waits for
// them (in forward order), so every param is current when step() returns; with it leaves them
// in flight for the forward pass (finish_param_sync per group).
void complete_param_sync_after_step(DistributedDataParallel& ddp,
                                    const std::vector<BucketGroupMainParams>& groups);

// Throws InvalidArgument naming the first slice whose views are not in the memory `math` runs on.
void require_slices_in_memory(const std::vector<OwnedSlice>& slices, const ShardMath& math);

class DistributedOptimizer : public Optimizer {
 public:
  // Manages the buffers `manages` accepts. The DDP must reduce-scatter its grads. `math` must
  // run where the DDP's buffers live (InvalidArgument naming a param otherwise).
  DistributedOptimizer(DistributedDataParallel& ddp, BufferSelector manages, AdamWOptions options,
                       bool overlap_param_gather_with_optimizer_step = false,
                       ShardMathPtr math = host_shard_math());

  std::string_view kind() const override { return "distributed"; }
  bool step_with_ready_grads() override;
  OptimizerState state_dict() const override { return adamw_->state_dict(); }
  OptimizerStateView state_view() const override { return adamw_->state_view(); }
  void load_state_dict(const OptimizerState& state) override;
  void check_state_dict(const OptimizerState& state) const override {
    adamw_->check_state_dict(state);
  }
  void check_owned_state(const OptimizerState& state) const override {
    adamw_->check_owned_state(state);
  }
  void take_state_dict(OptimizerState&& state) override;
  std::optional<StateLoadTargets> state_load_targets() override {
    return adamw_->state_load_targets();
  }
  void set_lr(double lr) override;
  void reload_model_params() override;
  void set_param_overrides(const ParamOverrides& overrides) override;
  std::set<std::string> param_names() const override;
  void set_params_without_grad(const std::set<std::string>& names) override;

  // The element slices this rank owns (for checkpoints: name, offset, count).
  const std::vector<OwnedSlice>& owned_slices() const { return slices_; }
  // Starts (or, without overlap_param_gather, completes) the all-gather of the managed buffers.
  void start_param_sync();
  bool overlaps_param_gather_with_step() const { return overlap_with_step_; }
  // The managed bucket groups in the order step_with_ready_grads updates (and, with the overlap,
  // dispatches) them: forward order.
  std::vector<int> step_order() const;
  // Called with each bucket group's index just before the step updates it (in step_order()):
  // tracing, and tests that check a group's gather is in flight while the next one is updated.
  void set_before_group_step(std::function<void(int bucket_group)> hook) {
    before_group_step_ = std::move(hook);
  }

 private:
  static std::vector<OwnedSlice> local_slices(const DistributedDataParallel& ddp,
                                              const BufferSelector& manages);

  DistributedDataParallel& ddp_;
  BufferSelector manages_;
  bool overlap_with_step_;
  std::function<void(int)> before_group_step_;
  std::vector<OwnedSlice> slices_;
  std::vector<BucketGroupMainParams> by_group_;
  // Param group i holds the owned slices of by_group_[i].
  std::unique_ptr<AdamW> adamw_;
};

}  // namespace shardwise::optim
