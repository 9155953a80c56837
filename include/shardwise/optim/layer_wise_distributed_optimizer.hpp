// LayerWiseDistributedOptimizer (Megatron-Core + Megatron-LM PR 4509): each rank owns WHOLE
// parameters, so Muon's Newton–Schulz runs on full matrices. Ownership comes from the published
// shard-aligned layout — owner = (start - bucket_start) / shard_size, and a param straddling a
// shard is a loud error — so optimizer and DDP agree by construction. Grads arrive by
// reduce-scatter into the owner's shard; after the step the managed bucket groups are
// all-gathered in place (only those: a sibling DistributedOptimizer syncs its own).
//
// Layer-wise shard groups (a buffer laid out for S < dp shards): owners are shard-group ranks,
// so each of the dp/S replicas steps the same params on the same (all-reduced) grads; only the
// first replica counts them in the grad norm / zero count and writes them to a checkpoint.
//
// Legacy path (no shard-aligned layout, grads all-reduced): owners come from the ping-pong
// assignment and params are synced by the flatten / all_gather_v / unflatten copy of PR 4509.
//
// The step walks the managed bucket groups in forward order. With
// overlap_param_gather_with_optimizer_step (buffer path only) each group's all-gather is
// dispatched as soon as its owned params are updated, overlapping the rest of the step; the
// updates are the same either way (bitwise).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "shardwise/ddp/distributed_data_parallel.hpp"
#include "shardwise/optim/adamw.hpp"
#include "shardwise/optim/distributed_optimizer.hpp"
#include "shardwise/optim/main_params.hpp"
#include "shardwise/optim/muon.hpp"

namespace shardwise::optim {

// A caller-supplied child optimizer (Megatron-Core hands the constructor the optimizers to chain).
// `selects` picks the managed params this child updates — every managed param must be picked by
// exactly one child — and `make` builds the child over the ones this rank owns: one ParamGroup
// per managed bucket group (named "bucket_group_<g>", forward order) of fp32 main-param views.
// Any Optimizer works.
struct LayerWiseChild {
  std::function<bool(const ParamInfo&)> selects;
  std::function<std::unique_ptr<Optimizer>(std::vector<ParamGroup>)> make;
};
// Run once on its child right after the child is built (Megatron-Core's init_state_fn_list), e.g.
// to create or load optimizer state.
using InitStateFn = std::function<void(Optimizer&)>;

class LayerWiseDistributedOptimizer : public Optimizer {
 public:
  // Convenience: manages the buffers `manages` accepts. Muon steps the owned params that
  // is_managed_by_layer_wise_optimizer accepts; AdamW the other owned params.
  // overlap_param_gather_with_optimizer_step needs the buffer path (InvalidArgument on legacy).
  // `math` runs the statistics and both children where the DDP's buffers live.
  LayerWiseDistributedOptimizer(DistributedDataParallel& ddp, BufferSelector manages,
                                MuonOptions muon, AdamWOptions adamw,
                                bool overlap_param_gather_with_optimizer_step = false,
                                ShardMathPtr math = host_shard_math());
  // Caller-supplied children, stepped in order; init_state_fn_list is empty or has one function
  // per child. InvalidArgument when a managed param is selected by no child or by several.
  // set_lr sets every child's lr. Params are gathered after all children have stepped. `math`
  // computes the grad statistics (the children bring their own).
  LayerWiseDistributedOptimizer(DistributedDataParallel& ddp, BufferSelector manages,
                                std::vector<LayerWiseChild> children,
                                std::vector<InitStateFn> init_state_fn_list = {},
                                ShardMathPtr math = host_shard_math());

  std::string_view kind() const override { return "layer_wise"; }
  bool step_with_ready_grads() override;
  OptimizerState state_dict() const override;
  OptimizerStateView state_view() const override;
  std::optional<StateLoadTargets> state_load_targets() override;
  void load_state_dict(const OptimizerState& state) override;
  void check_state_dict(const OptimizerState& state) const override;
  void check_owned_state(const OptimizerState& state) const override;
  void take_state_dict(OptimizerState&& state) override;
  void set_lr(double lr) override;
  void reload_model_params() override;
  void set_param_overrides(const ParamOverrides& overrides) override;
  std::set<std::string> param_names() const override;
  void set_params_without_grad(const std::set<std::string>& names) override;

  bool uses_legacy_sync() const { return legacy_; }
  // Owning rank of every managed param (both paths): its rank in the buffer's group
  // (DistributedDataParallel::group_for: the shard group when the buffer has shard groups).
  const std::map<ParamId, int>& owners() const { return owners_; }
  const std::vector<OwnedSlice>& owned_params() const { return slices_; }
  bool overlaps_param_gather_with_step() const { return overlap_with_step_; }
  // Whether this rank's copy of an owned param is a replica of one another shard group's rank
  // also owns (this rank is not the first replica): not counted in statistics, not saved.
  bool is_replica_copy(const std::string& param_name) const;
  // Most replicas any managed buffer has (1: no shard groups smaller than dp).
  int replicas() const { return replicas_; }
  // The managed bucket groups in the order step_with_ready_grads updates (and, with the overlap,
  // dispatches) them: forward order.
  std::vector<int> step_order() const;
  // Called with each bucket group's index just before the step updates it (in step_order()):
  // tracing, and tests that check a group's gather is in flight while the next one is updated.
  void set_before_group_step(std::function<void(int bucket_group)> hook) {
    before_group_step_ = std::move(hook);
  }
  // The chained children, in step order.
  const std::vector<std::unique_ptr<Optimizer>>& children() const { return children_; }

  // Param sync after a step: buffer all-gather of the managed groups, or the legacy copy path.
  void sync_params();
  // Alternative sync: every rank broadcasts the params it owns to the others.
  void broadcast_params();

 private:
  LayerWiseDistributedOptimizer(DistributedDataParallel& ddp, BufferSelector manages,
                                bool overlap_param_gather_with_optimizer_step, ShardMathPtr math);
  static std::map<ParamId, int> compute_owners(const DistributedDataParallel& ddp,
                                               const BufferSelector& manages, bool legacy);
  std::vector<OwnedSlice> local_params() const;
  bool counts_in_grad_statistics(const OptimParam& param) const override;
  void build_children(std::vector<LayerWiseChild> children,
                      const std::vector<InitStateFn>& init_state_fn_list);
  // Index of the child that selects `param` (exactly one does, checked at construction).
  std::size_t child_of(ParamId param) const;

  DistributedDataParallel& ddp_;
  BufferSelector manages_;
  bool legacy_;
  bool overlap_with_step_;
  std::function<void(int)> before_group_step_;
  std::map<ParamId, int> owners_;
  std::vector<OwnedSlice> slices_;
  std::set<std::string> replica_copies_;  // names of owned params another replica counts
  int replicas_ = 1;
  std::vector<BucketGroupMainParams> by_group_;
  // Param group i of each child holds its share of the owned params of by_group_[i].
  std::vector<std::unique_ptr<Optimizer>> children_;
  std::vector<std::function<bool(const ParamInfo&)>> selects_;
  // Set on the convenience path, which steps one bucket group at a time (the overlap needs it).
  Muon* muon_ = nullptr;
  AdamW* adamw_ = nullptr;
  double muon_lr_ratio_ = 1.0;  // Muon lr / AdamW lr, so one schedule drives both
};

}  // namespace shardwise::optim
