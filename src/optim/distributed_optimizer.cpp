#include "shardwise/optim/distributed_optimizer.hpp"

#include <algorithm>
#include <map>

#include "shardwise/core/error.hpp"

namespace shardwise::optim {

std::vector<BucketGroupMainParams> split_by_bucket_group(const DistributedDataParallel& ddp,
                                                         const BufferSelector& manages,
                                                         const std::vector<OwnedSlice>& slices,
                                                         const ShardMathPtr& math) {
  const auto& groups = ddp.bucket_groups();
  // Groups are indexed in backprop order; forward meets them from the last index down.
  std::vector<int> forward;
  std::vector<int> position(groups.size(), -1);
  for (int g = static_cast<int>(groups.size()) - 1; g >= 0; --g) {
    if (!manages(groups[static_cast<std::size_t>(g)]->key())) continue;
    position[static_cast<std::size_t>(g)] = static_cast<int>(forward.size());
    forward.push_back(g);
  }
  std::vector<std::vector<OwnedSlice>> parts(forward.size());
  for (const OwnedSlice& s : slices) {
    const int pos = position[static_cast<std::size_t>(ddp.bucket_group_of(s.param))];
    SW_CHECK(pos >= 0, "owned param '", s.name, "' is in bucket group ",
             ddp.bucket_group_of(s.param), ", which this optimizer does not manage");
    parts[static_cast<std::size_t>(pos)].push_back(s);
  }
  std::vector<BucketGroupMainParams> out;
  out.reserve(forward.size());
  for (std::size_t i = 0; i < forward.size(); ++i) {
    out.push_back(BucketGroupMainParams{forward[i], MainParams(std::move(parts[i]), math)});
  }
  return out;
}

std::vector<OptimParam> optim_params_in_slice_order(
    std::vector<BucketGroupMainParams>& groups, const std::vector<OwnedSlice>& slices,
    const std::function<bool(const OwnedSlice&)>& select) {
  std::map<std::string, OptimParam> by_name;
  for (BucketGroupMainParams& group : groups) {
    for (OptimParam& p : group.main.optim_params(select)) {
      std::string name = p.name;
      by_name.emplace(std::move(name), std::move(p));
    }
  }
  std::vector<OptimParam> out;
  for (const OwnedSlice& s : slices) {
    if (!select(s)) continue;
    auto it = by_name.find(s.name);
    SW_CHECK(it != by_name.end(), "owned param '", s.name, "' has no main param");
    out.push_back(std::move(it->second));
  }
  return out;
}

void complete_param_sync_after_step(DistributedDataParallel& ddp,
                                    const std::vector<BucketGroupMainParams>& groups) {
  if (ddp.config().overlap_param_gather) return;  // the forward pass waits group by group
  for (const BucketGroupMainParams& g : groups) ddp.finish_param_sync(g.bucket_group);
}

void require_slices_in_memory(const std::vector<OwnedSlice>& slices, const ShardMath& math) {
  for (const OwnedSlice& s : slices) {
    math.require_same_memory(s.model_param.device, str_cat("param '", s.name, "'"));
    math.require_same_memory(s.grad.device, str_cat("the gradient of param '", s.name, "'"));
  }
}

std::vector<OwnedSlice> DistributedOptimizer::local_slices(const DistributedDataParallel& ddp,
                                                           const BufferSelector& manages) {
  std::vector<OwnedSlice> slices;
  for (const auto& buffer : ddp.buffers()) {
    if (!manages(buffer->key())) continue;
    SW_REQUIRE(ddp.config().reduce_scatter_grads(), InvalidArgument,
               "DistributedOptimizer needs DDP with use_distributed_optimizer (reduce-scattered "
               "grads); buffer ",
               buffer->key().to_string(), " is all-reduced");
    for (const Bucket& bucket : buffer->buckets()) {
      const BucketRange shard = ddp.local_shard_range(buffer->key(), bucket.index);
      for (ParamId id : bucket.params) {
        const ParamRange& range = buffer->range_of(id);
        const std::int64_t lo = std::max(range.start, shard.start);
        const std::int64_t hi = std::min(range.end, shard.end);
        if (lo >= hi) continue;
        const ParamInfo& info = ddp.params()[id];
        OwnedSlice s;
        s.param = id;
        s.name = info.name;
        s.shape = info.shape;
        s.offset = lo - range.start;
        s.count = hi - lo;
        s.model_param = buffer->param_data().slice(lo, hi - lo);
        s.grad = buffer->grad_data().slice(lo, hi - lo);
        s.qkv_split = info.qkv_split;
        slices.push_back(std::move(s));
      }
    }
  }
  return slices;
}

DistributedOptimizer::DistributedOptimizer(DistributedDataParallel& ddp, BufferSelector manages,
                                           AdamWOptions options,
                                           bool overlap_param_gather_with_optimizer_step,
                                           ShardMathPtr math)
    : Optimizer({}, std::move(math)),
      ddp_(ddp),
      manages_(std::move(manages)),
      overlap_with_step_(overlap_param_gather_with_optimizer_step),
      slices_(local_slices(ddp, manages_)),
      by_group_(split_by_bucket_group(ddp_, manages_, slices_, math_)) {
  SW_REQUIRE(!overlap_with_step_ || ddp_.config().reduce_scatter_grads(), InvalidArgument,
             "overlap_param_gather_with_optimizer_step needs DDP with use_distributed_optimizer");
  require_slices_in_memory(slices_, *math_);
  const auto all = [](const OwnedSlice&) { return true; };
  // The outer group (grad norm, clipping) lists the slices in buffer order, as before the step
  // was split by bucket group, so the norm is summed in the same order.
  groups_ = single_group(optim_params_in_slice_order(by_group_, slices_, all));
  groups_.front().name = "distributed";
  std::vector<ParamGroup> inner;
  for (BucketGroupMainParams& g : by_group_) {
    inner.push_back(
        ParamGroup{str_cat("bucket_group_", g.bucket_group), g.main.optim_params(all), {}});
  }
  adamw_ = std::make_unique<AdamW>(std::move(inner), options, math_);
}

std::vector<int> DistributedOptimizer::step_order() const {
  std::vector<int> order;
  for (const BucketGroupMainParams& g : by_group_) order.push_back(g.bucket_group);
  return order;
}

bool DistributedOptimizer::step_with_ready_grads() {
  bool stepped = true;
  for (std::size_t i = 0; i < by_group_.size(); ++i) {
    if (before_group_step_) before_group_step_(by_group_[i].bucket_group);
    stepped = adamw_->step_group(i) && stepped;
    by_group_[i].main.copy_main_to_model();
    if (overlap_with_step_) ddp_.start_param_sync_for_group(by_group_[i].bucket_group);
  }
  if (overlap_with_step_) {
    complete_param_sync_after_step(ddp_, by_group_);
  } else {
    start_param_sync();
  }
  return stepped;
}

void DistributedOptimizer::start_param_sync() {
  ddp_.start_param_sync_for_bucket_groups(
      [this](const BucketGroup& group) { return manages_(group.key()); });
}

void DistributedOptimizer::load_state_dict(const OptimizerState& state) {
  adamw_->load_state_dict(state);
}

void DistributedOptimizer::take_state_dict(OptimizerState&& state) {
  adamw_->take_state_dict(std::move(state));
}

void DistributedOptimizer::set_param_overrides(const ParamOverrides& overrides) {
  check_param_overrides(overrides);
  adamw_->set_param_overrides(overrides_for(*adamw_, overrides));
}

std::set<std::string> DistributedOptimizer::param_names() const {
  std::set<std::string> names;
  for (const auto& buffer : ddp_.buffers()) {
    if (!manages_(buffer->key())) continue;
    for (const ParamRange& range : buffer->layout().param_index_map) {
      names.insert(ddp_.params()[range.param].name);
    }
  }
  return names;
}

void DistributedOptimizer::set_params_without_grad(const std::set<std::string>& names) {
  adamw_->set_params_without_grad(names);
}

void DistributedOptimizer::set_lr(double lr) {
  Optimizer::set_lr(lr);
  adamw_->set_lr(lr);
}

void DistributedOptimizer::reload_model_params() {
  for (BucketGroupMainParams& g : by_group_) g.main.copy_model_to_main();
}

}  // namespace shardwise::optim
