#include "shardwise/optim/distributed_optimizer.hpp"

#include <algorithm>

#include "shardwise/core/error.hpp"

namespace shardwise::optim {

std::vector<OwnedSlice> DistributedOptimizer::local_slices(const DistributedDataParallel& ddp,
                                                           const BufferSelector& manages) {
  std::vector<OwnedSlice> slices;
  for (const auto& buffer : ddp.buffers()) {
    if (!manages(buffer->key())) continue;
    SW_REQUIRE(ddp.config().reduce_scatter_grads(), InvalidArgument,
               "DistributedOptimizer needs DDP with use_distributed_optimizer (reduce-scattered "
               "grads); buffer ", buffer->key().to_string(), " is all-reduced");
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
                                           AdamWOptions options)
    : Optimizer({}), ddp_(ddp), manages_(std::move(manages)), main_(local_slices(ddp, manages_)) {
  groups_ = single_group(main_.optim_params([](const OwnedSlice&) { return true; }));
  groups_.front().name = "distributed";
  adamw_ = std::make_unique<AdamW>(groups_, options);
}

bool DistributedOptimizer::step_with_ready_grads() {
  const bool stepped = adamw_->step_with_ready_grads();
  main_.copy_main_to_model();
  start_param_sync();
  return stepped;
}

void DistributedOptimizer::start_param_sync() {
  ddp_.start_param_sync_for_bucket_groups(
      [this](const BucketGroup& group) { return manages_(group.key()); });
}

void DistributedOptimizer::load_state_dict(const OptimizerState& state) {
  adamw_->load_state_dict(state);
}

void DistributedOptimizer::set_lr(double lr) {
  Optimizer::set_lr(lr);
  adamw_->set_lr(lr);
}

}  // namespace shardwise::optim
