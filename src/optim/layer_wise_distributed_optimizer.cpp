#include "shardwise/optim/layer_wise_distributed_optimizer.hpp"

#include <algorithm>

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
    DistributedDataParallel& ddp, BufferSelector manages,
    bool overlap_param_gather_with_optimizer_step, ShardMathPtr math)
    : Optimizer({}, std::move(math)),
      ddp_(ddp),
      manages_(std::move(manages)),
      legacy_(!ddp.config().reduce_scatter_grads()),
      overlap_with_step_(overlap_param_gather_with_optimizer_step),
      owners_(compute_owners(ddp_, manages_, legacy_)),
      slices_(local_params()),
      by_group_(split_by_bucket_group(ddp_, manages_, slices_, math_)) {
  require_slices_in_memory(slices_, *math_);
  for (const auto& buffer : ddp_.buffers()) {
    const ProcessGroupPtr& replica = ddp_.replica_group_for(buffer->key());
    if (manages_(buffer->key()) && replica != nullptr) {
      replicas_ = std::max(replicas_, replica->size());
    }
  }
  for (const OwnedSlice& slice : slices_) {
    const ProcessGroupPtr& replica = ddp_.replica_group_for(ddp_.buffer_of(slice.param).key());
    if (replica != nullptr && replica->rank() != 0) replica_copies_.insert(slice.name);
  }
  SW_REQUIRE(!(overlap_with_step_ && legacy_), InvalidArgument,
             "overlap_param_gather_with_optimizer_step needs the buffer all-gather (grads "
             "reduce-scattered); the legacy layer-wise path syncs params with all_gather_v");
}

LayerWiseDistributedOptimizer::LayerWiseDistributedOptimizer(
    DistributedDataParallel& ddp, BufferSelector manages, MuonOptions muon, AdamWOptions adamw,
    bool overlap_param_gather_with_optimizer_step, ShardMathPtr math)
    : LayerWiseDistributedOptimizer(ddp, std::move(manages),
                                    overlap_param_gather_with_optimizer_step, std::move(math)) {
  std::vector<LayerWiseChild> children;
  children.push_back({[](const ParamInfo& p) { return is_managed_by_layer_wise_optimizer(p); },
                      [this, muon](std::vector<ParamGroup> groups) {
                        auto child = std::make_unique<Muon>(std::move(groups), muon, math_);
                        muon_ = child.get();
                        return std::unique_ptr<Optimizer>(std::move(child));
                      }});
  children.push_back({[](const ParamInfo& p) { return !is_managed_by_layer_wise_optimizer(p); },
                      [this, adamw](std::vector<ParamGroup> groups) {
                        auto child = std::make_unique<AdamW>(std::move(groups), adamw, math_);
                        adamw_ = child.get();
                        return std::unique_ptr<Optimizer>(std::move(child));
                      }});
  build_children(std::move(children), {});
  muon_lr_ratio_ = adamw.lr > 0 ? muon.lr / adamw.lr : 1.0;
}

LayerWiseDistributedOptimizer::LayerWiseDistributedOptimizer(
    DistributedDataParallel& ddp, BufferSelector manages, std::vector<LayerWiseChild> children,
    std::vector<InitStateFn> init_state_fn_list, ShardMathPtr math)
    : LayerWiseDistributedOptimizer(ddp, std::move(manages), false, std::move(math)) {
  SW_REQUIRE(!children.empty(), InvalidArgument,
             "LayerWiseDistributedOptimizer: no optimizers given");
  SW_REQUIRE(init_state_fn_list.empty() || init_state_fn_list.size() == children.size(),
             InvalidArgument, "LayerWiseDistributedOptimizer: init_state_fn_list has ",
             init_state_fn_list.size(), " functions for ", children.size(), " optimizers");
  build_children(std::move(children), init_state_fn_list);
}

void LayerWiseDistributedOptimizer::build_children(
    std::vector<LayerWiseChild> children, const std::vector<InitStateFn>& init_state_fn_list) {
  const ParamList& params = ddp_.params();
  for (const LayerWiseChild& child : children) {
    SW_REQUIRE(child.selects && child.make, InvalidArgument,
               "LayerWiseDistributedOptimizer: an optimizer lacks its selects or make function");
    selects_.push_back(child.selects);
  }
  // Every managed param (on every rank, so all ranks fail alike) has exactly one child.
  for (const auto& [id, owner] : owners_) {
    std::size_t picked = 0;
    for (const auto& selects : selects_) picked += selects(params[id]) ? 1 : 0;
    SW_REQUIRE(picked == 1, InvalidArgument, "LayerWiseDistributedOptimizer: param '",
               params[id].name, "' is selected by ", picked,
               " of the given optimizers (needs exactly one)");
  }
  for (std::size_t c = 0; c < children.size(); ++c) {
    const auto selected = [&](const OwnedSlice& s) { return child_of(s.param) == c; };
    std::vector<ParamGroup> child_groups;
    for (BucketGroupMainParams& g : by_group_) {
      child_groups.push_back(
          ParamGroup{str_cat("bucket_group_", g.bucket_group), g.main.optim_params(selected), {}});
    }
    children_.push_back(children[c].make(std::move(child_groups)));
    SW_REQUIRE(children_.back() != nullptr, InvalidArgument,
               "LayerWiseDistributedOptimizer: optimizer ", c, "'s make function returned null");
    if (!init_state_fn_list.empty() && init_state_fn_list[c]) init_state_fn_list[c](*children_[c]);
    // The outer groups keep the slices in layout order, so the grad norm is summed in the same
    // order whether or not the step is split by bucket group.
    groups_.push_back(ParamGroup{std::string(children_.back()->kind()),
                                 optim_params_in_slice_order(by_group_, slices_, selected),
                                 {}});
  }
}

bool LayerWiseDistributedOptimizer::is_replica_copy(const std::string& param_name) const {
  return replica_copies_.count(param_name) != 0;
}

bool LayerWiseDistributedOptimizer::counts_in_grad_statistics(const OptimParam& param) const {
  return replica_copies_.empty() || !is_replica_copy(param.name);
}

std::size_t LayerWiseDistributedOptimizer::child_of(ParamId param) const {
  for (std::size_t c = 0; c < selects_.size(); ++c) {
    if (selects_[c](ddp_.params()[param])) return c;
  }
  SW_CHECK(false, "param ", param, " has no child optimizer");
  return 0;
}

std::vector<int> LayerWiseDistributedOptimizer::step_order() const {
  std::vector<int> order;
  for (const BucketGroupMainParams& g : by_group_) order.push_back(g.bucket_group);
  return order;
}

bool LayerWiseDistributedOptimizer::step_with_ready_grads() {
  bool stepped = false;
  if (muon_ != nullptr && adamw_ != nullptr) {
    // Built-in pair: one bucket group at a time, so its gather can start right after.
    for (std::size_t i = 0; i < by_group_.size(); ++i) {
      if (before_group_step_) before_group_step_(by_group_[i].bucket_group);
      const bool muon_stepped = muon_->step_group(i);
      const bool adam_stepped = adamw_->step_group(i);
      stepped = stepped || muon_stepped || adam_stepped;
      by_group_[i].main.copy_main_to_model();
      if (overlap_with_step_) ddp_.start_param_sync_for_group(by_group_[i].bucket_group);
    }
  } else {
    for (auto& child : children_) stepped = child->step_with_ready_grads() || stepped;
    for (BucketGroupMainParams& g : by_group_) g.main.copy_main_to_model();
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
  OptimizerState state;
  for (const auto& child : children_) {
    for (auto& [name, entry] : child->state_dict()) state[name] = entry;
  }
  return state;
}

OptimizerStateView LayerWiseDistributedOptimizer::state_view() const {
  OptimizerStateView view;
  for (const auto& child : children_) view.merge(child->state_view());
  return view;
}

std::optional<StateLoadTargets> LayerWiseDistributedOptimizer::state_load_targets() {
  return merged_state_load_targets(children_);
}

void LayerWiseDistributedOptimizer::check_state_dict(const OptimizerState& state) const {
  check_composite_state(children_, state, "layer-wise optimizer");
}

void LayerWiseDistributedOptimizer::check_owned_state(const OptimizerState& state) const {
  for (const auto& child : children_) child->check_owned_state(state);
}

// Every child's part is checked before any child loads: a bad entry leaves all of them as they
// were.
void LayerWiseDistributedOptimizer::load_state_dict(const OptimizerState& state) {
  check_state_dict(state);
  load_composite_state(children_, state);
}

void LayerWiseDistributedOptimizer::take_state_dict(OptimizerState&& state) {
  check_state_dict(state);
  take_composite_state(children_, std::move(state));
}

void LayerWiseDistributedOptimizer::set_param_overrides(const ParamOverrides& overrides) {
  check_param_overrides(overrides);
  for (auto& child : children_) child->set_param_overrides(overrides_for(*child, overrides));
}

std::set<std::string> LayerWiseDistributedOptimizer::param_names() const {
  std::set<std::string> names;
  for (const auto& [id, owner] : owners_) names.insert(ddp_.params()[id].name);
  return names;
}

void LayerWiseDistributedOptimizer::set_params_without_grad(const std::set<std::string>& names) {
  for (auto& child : children_) child->set_params_without_grad(names);
}

void LayerWiseDistributedOptimizer::set_lr(double lr) {
  Optimizer::set_lr(lr);
  for (auto& child : children_) {
    child->set_lr(child.get() == muon_ ? lr * muon_lr_ratio_ : lr);
  }
}

void LayerWiseDistributedOptimizer::reload_model_params() {
  for (BucketGroupMainParams& g : by_group_) g.main.copy_model_to_main();
}

}  // namespace shardwise::optim
