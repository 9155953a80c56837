// LayerWiseDistributedOptimizer (seed 001 + the merged PR of seed 002): each rank owns WHOLE
// parameters, so Muon's Newton–Schulz runs on full matrices. Ownership comes from the published
// shard-aligned layout — owner = (start - bucket_start) / shard_size, and a param straddling a
// shard is a loud error — so optimizer and DDP agree by construction. Grads arrive by
// reduce-scatter into the owner's shard; after the step the managed bucket groups are
// all-gathered in place (only those: a sibling DistributedOptimizer syncs its own).
//
// Legacy path (no shard-aligned layout, grads all-reduced): owners come from the ping-pong
// assignment and params are synced by the flatten / all_gather_v / unflatten copy of seed 002.
//
// The step walks the managed bucket groups in forward order. With
// overlap_param_gather_with_optimizer_step (buffer path only) each group's all-gather is
// dispatched as soon as its owned params are updated, overlapping the rest of the step; the
// updates are the same either way (bitwise).
#pragma once

#include <map>
#include <memory>

#include "shardwise/ddp/distributed_data_parallel.hpp"
#include "shardwise/optim/adamw.hpp"
#include "shardwise/optim/distributed_optimizer.hpp"
#include "shardwise/optim/main_params.hpp"
#include "shardwise/optim/muon.hpp"

namespace shardwise::optim {

class LayerWiseDistributedOptimizer : public Optimizer {
 public:
  // Manages the buffers `manages` accepts. Muon steps the owned params that
  // is_managed_by_layer_wise_optimizer accepts; AdamW the other owned params.
  // overlap_param_gather_with_optimizer_step needs the buffer path (InvalidArgument on legacy).
  LayerWiseDistributedOptimizer(DistributedDataParallel& ddp, BufferSelector manages,
                                MuonOptions muon, AdamWOptions adamw,
                                bool overlap_param_gather_with_optimizer_step = false);

  std::string_view kind() const override { return "layer_wise"; }
  bool step_with_ready_grads() override;
  OptimizerState state_dict() const override;
  void load_state_dict(const OptimizerState& state) override;
  void set_lr(double lr) override;

  bool uses_legacy_sync() const { return legacy_; }
  // Owning data-parallel rank of every managed param (both paths).
  const std::map<ParamId, int>& owners() const { return owners_; }
  const std::vector<OwnedSlice>& owned_params() const { return slices_; }
  bool overlaps_param_gather_with_step() const { return overlap_with_step_; }
  // The managed bucket groups in the order step_with_ready_grads updates (and, with the overlap,
  // dispatches) them: forward order.
  std::vector<int> step_order() const;

  // Param sync after a step: buffer all-gather of the managed groups, or the legacy copy path.
  void sync_params();
  // Alternative sync: every rank broadcasts the params it owns to the others.
  void broadcast_params();

 private:
  static std::map<ParamId, int> compute_owners(const DistributedDataParallel& ddp,
                                               const BufferSelector& manages, bool legacy);
  std::vector<OwnedSlice> local_params() const;

  DistributedDataParallel& ddp_;
  BufferSelector manages_;
  bool legacy_;
  bool overlap_with_step_;
  std::map<ParamId, int> owners_;
  std::vector<OwnedSlice> slices_;
  std::vector<BucketGroupMainParams> by_group_;
  // Param group i of each holds its share of the owned params of by_group_[i].
  std::unique_ptr<Muon> muon_;
  std::unique_ptr<AdamW> adamw_;
  double muon_lr_ratio_ = 1.0;  // Muon lr / AdamW lr, so one schedule drives both
};

}  // namespace shardwise::optim
