#include "shardwise/optim/layer_wise_distributed_optimizer.hpp"

#include "shardwise/core/error.hpp"
#include "shardwise/layout/layout_algorithms.hpp"

namespace shardwise::optim {

std::map<ParamId, int> LayerWiseDistributedOptimizer::compute_owners(
    const DistributedDataParallel& ddp, const BufferSelector& manages, bool legacy) {
  std::map<ParamId, int> owners;
  if (!legacy) {
    for (const auto& buffer : ddp.buffers()) {
      if (!manages(buffer->key())) continue;
      const PerBufferParamLayout& layout = buffer->layout();
      SW_REQUIRE(layout.shard_aligned, InvalidArgument, "LayerWiseDistributedOptimizer: buffer ",
                 buffer->key().to_string(), " does not have a shard-aligned layout");
      // owner_shard throws when a param straddles a shard boundary: never step a param whose
      // grad was reduce-scattered to two ranks.
      for (const ParamRange& range : layout.param_index_map) {
        owners[range.param] = layout.owner_shard(range);
      }
    }
    return owners;
  }
  // Ping-pong over dense and expert params separately, each on its own group size.
  for (bool expert : {false, true}) {
    std::vector<ParamId> ids;
    int ranks = 0;
    for (const auto& buffer : ddp.buffers()) {
      if (!manages(buffer->key()) || buffer->key().is_expert_parallel != expert) continue;
      ranks = ddp.group_for(buffer->key())->size();
      for (const ParamRange& range : buffer->layout().param_index_map) ids.push_back(range.param);
    }
    if (ids.empty()) continue;
    std::sort(ids.begin(), ids.end());  // forward order, as the model lists them
    const auto assignment = ping_pong_shard_assignment(ddp.params(), ids, ranks);
    for (int r = 0; r < static_cast<int>(assignment.size()); ++r) {
      for (ParamId id : assignment[r]) owners[id] = r;
    }
  }
  return owners;
}

std::vector<OwnedSlice> LayerWiseDistributedOptimizer::local_params() const {
  std::vector<OwnedSlice> out;
  for (const auto& [id, owner] : owners_) {
    const ParamAndGradBuffer& buffer = ddp_.buffer_of(id);
    if (owner != ddp_.group_for(buffer.key())->rank()) continue;
    const ParamInfo& info = ddp_.params()[id];
    OwnedSlice s;
    s.param = id;
    s.name = info.name;
    s.shape = info.shape;
    s.offset = 0;
    s.count = info.numel();
    s.model_param = ddp_.param(id);
    s.grad = ddp_.main_grad(id);
    s.qkv_split = info.qkv_split;
    out.push_back(std::move(s));
  }
  return out;
}

LayerWiseDistributedOptimizer::LayerWiseDistributedOptimizer(
    DistributedDataParallel& ddp, BufferSelector manages, MuonOptions muon, AdamWOptions adamw,
    bool overlap_param_gather_with_optimizer_step)
    : Optimizer({}),
      ddp_(ddp),
      manages_(std::move(manages)),
      legacy_(!ddp.config().reduce_scatter_grads()),
      overlap_with_step_(overlap_param_gather_with_optimizer_step),
      owners_(compute_owners(ddp_, manages_, legacy_)),
      slices_(local_params()),
      by_group_(split_by_bucket_group(ddp_, manages_, slices_)) {
  SW_REQUIRE(!(overlap_with_step_ && legacy_), InvalidArgument,
             "overlap_param_gather_with_optimizer_step needs the buffer all-gather (grads "
             "reduce-scattered); the legacy layer-wise path syncs params with all_gather_v");
  const ParamList& params = ddp_.params();
  const auto by_muon = [&](const OwnedSlice& s) {
    return is_managed_by_layer_wise_optimizer(params[s.param]);
  };
  const auto by_adam = [&](const OwnedSlice& s) { return !by_muon(s); };
  // The outer groups keep the slices in layout order, so the grad norm is summed in the same
  // order whether or not the step is split by bucket group.
  groups_ = {ParamGroup{"muon", optim_params_in_slice_order(by_group_, slices_, by_muon), {}},
             ParamGroup{"adamw", optim_params_in_slice_order(by_group_, slices_, by_adam), {}}};
  std::vector<ParamGroup> muon_groups, adam_groups;
  for (BucketGroupMainParams& g : by_group_) {
    const std::string name = str_cat("bucket_group_", g.bucket_group);
    muon_groups.push_back(ParamGroup{name, g.main.optim_params(by_muon), {}});
    adam_groups.push_back(ParamGroup{name, g.main.optim_params(by_adam), {}});
  }
  muon_ = std::make_unique<Muon>(std::move(muon_groups), muon);
  adamw_ = std::make_unique<AdamW>(std::move(adam_groups), adamw);
  muon_lr_ratio_ = adamw.lr > 0 ? muon.lr / adamw.lr : 1.0;
}

std::vector<int> LayerWiseDistributedOptimizer::step_order() const {
  std::vector<int> order;
  for (const BucketGroupMainParams& g : by_group_) order.push_back(g.bucket_group);
  return order;
}

bool LayerWiseDistributedOptimizer::step_with_ready_grads() {
  bool stepped = false;
  for (std::size_t i = 0; i < by_group_.size(); ++i) {
    const bool muon_stepped = muon_->step_group(i);
    const bool adam_stepped = adamw_->step_group(i);
    stepped = stepped || muon_stepped || adam_stepped;
    by_group_[i].main.copy_main_to_model();
    if (overlap_with_step_) ddp_.start_param_sync_for_group(by_group_[i].bucket_group);
  }
  if (overlap_with_step_) {
    complete_param_sync_after_step(ddp_, by_group_);
  } else {
    sync_params();
  }
  return stepped;
}

void LayerWiseDistributedOptimizer::sync_params() {
  if (legacy_) {
    ddp_.legacy_param_sync(owners_);
    return;
  }
  ddp_.start_param_sync_for_bucket_groups(
      [this](const BucketGroup& group) { return manages_(group.key()); });
}

void LayerWiseDistributedOptimizer::broadcast_params() {
  // Every rank walks the owners in the same (ParamId) order, so the broadcasts match up.
  for (const auto& [id, owner] : owners_) {
    const auto& group = ddp_.group_for(ddp_.buffer_of(id).key());
    group->broadcast(ddp_.param(id), owner)->wait();
  }
}

OptimizerState LayerWiseDistributedOptimizer::state_dict() const {
  OptimizerState state = muon_->state_dict();
  for (auto& [name, entry] : adamw_->state_dict()) state[name] = entry;
  return state;
}

void LayerWiseDistributedOptimizer::load_state_dict(const OptimizerState& state) {
  OptimizerState muon_state, adam_state;
  const ParamList& params = ddp_.params();
  for (const OwnedSlice& s : slices_) {
    auto it = state.find(s.name);
    SW_REQUIRE(it != state.end(), InvalidArgument,
               "layer-wise optimizer state has no entry for owned param '", s.name, "'");
    (is_managed_by_layer_wise_optimizer(params[s.param]) ? muon_state : adam_state)[s.name] =
        it->second;
  }
  SW_REQUIRE(state.size() == muon_state.size() + adam_state.size(), InvalidArgument,
             "layer-wise optimizer state has ", state.size(), " entries but this rank owns ",
             muon_state.size() + adam_state.size(), " params");
  muon_->load_state_dict(muon_state);
  adamw_->load_state_dict(adam_state);
}

void LayerWiseDistributedOptimizer::set_lr(double lr) {
  Optimizer::set_lr(lr);
  adamw_->set_lr(lr);
  muon_->set_lr(lr * muon_lr_ratio_);
}

}  // namespace shardwise::optim
