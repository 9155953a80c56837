#include "shardwise/ddp/bucket_group.hpp"

#include <algorithm>
#include <limits>

#include "shardwise/core/error.hpp"

namespace shardwise {

namespace {

// Backprop completes a group when it reaches the group's earliest (smallest-id) param.
ParamId smallest_param(const ParamAndGradBuffer& buffer, const std::vector<int>& buckets) {
  ParamId smallest = std::numeric_limits<ParamId>::max();
  for (int b : buckets) {
    for (ParamId p : buffer.buckets()[static_cast<std::size_t>(b)].params) {
      smallest = std::min(smallest, p);
    }
  }
  return smallest;
}

}  // namespace

std::vector<BucketGroupPlan> plan_bucket_groups(
    const std::vector<const ParamAndGradBuffer*>& buffers,
    const DistributedDataParallelConfig& config) {
  // Per buffer, its groups in bucket order.
  std::vector<std::vector<BucketGroupPlan>> per_buffer(buffers.size());
  for (std::size_t i = 0; i < buffers.size(); ++i) {
    const int num_buckets = static_cast<int>(buffers[i]->buckets().size());
    const int per_group = config.overlap_grad_reduce ? config.num_buckets_per_group : num_buckets;
    for (int first = 0; first < num_buckets; first += per_group) {
      BucketGroupPlan plan;
      plan.buffer = i;
      for (int b = first; b < std::min(num_buckets, first + per_group); ++b) {
        plan.buckets.push_back(b);
      }
      per_buffer[i].push_back(std::move(plan));
    }
  }
  // Merge the per-buffer sequences, always taking the head that backprop completes first
  // (largest smallest-param id; ties to the lower buffer index). Each buffer keeps its order.
  std::vector<BucketGroupPlan> order;
  std::vector<std::size_t> head(buffers.size(), 0);
  while (true) {
    std::optional<std::size_t> best;
    ParamId best_key = 0;
    for (std::size_t i = 0; i < buffers.size(); ++i) {
      if (head[i] == per_buffer[i].size()) continue;
      const ParamId key = smallest_param(*buffers[i], per_buffer[i][head[i]].buckets);
      // Groups without params are reached "immediately": treat them as the largest key.
      if (!best || key > best_key) {
        best = i;
        best_key = key;
      }
    }
    if (!best) break;
    order.push_back(std::move(per_buffer[*best][head[*best]++]));
  }
  return order;
}

BucketGroup::BucketGroup(int index, ParamAndGradBuffer* buffer, std::vector<int> bucket_indices,
                         ProcessGroupPtr group, const DistributedDataParallelConfig* config,
                         ProcessGroupPtr replica_group)
    : index_(index),
      buffer_(buffer),
      bucket_indices_(std::move(bucket_indices)),
      group_(std::move(group)),
      config_(config),
      replica_group_(std::move(replica_group)) {
  SW_CHECK(buffer_ != nullptr && group_ != nullptr && config_ != nullptr, "bucket group ", index);
  for (int b : bucket_indices_) {
    const Bucket& bucket = buffer_->buckets()[static_cast<std::size_t>(b)];
    params_.insert(params_.end(), bucket.params.begin(), bucket.params.end());
  }
}

std::vector<const Bucket*> BucketGroup::buckets() const {
  std::vector<const Bucket*> out;
  out.reserve(bucket_indices_.size());
  for (int b : bucket_indices_) out.push_back(&buffer_->buckets()[static_cast<std::size_t>(b)]);
  return out;
}

bool BucketGroup::contains(ParamId param) const {
  return buffer_->contains(param) && std::find(bucket_indices_.begin(), bucket_indices_.end(),
                                               buffer_->bucket_of(param)) != bucket_indices_.end();
}

void BucketGroup::start_grad_sync() {
  SW_CHECK(!grad_dispatched_, "bucket group ", index_, " dispatched twice in one iteration");
  const ReduceOp op = config_->average_in_collective ? ReduceOp::kAvg : ReduceOp::kSum;
  const bool reduce_scatter = config_->reduce_scatter_grads();
  for (int b : bucket_indices_) {
    const Bucket& bucket = buffer_->buckets()[static_cast<std::size_t>(b)];
    // Scaling before the collective keeps sums in range (Megatron scales by 1/dp, then sums).
    // For fp32 sums the group applies it inside its reduction: no pass over the bucket here.
    if (reduce_scatter && op == ReduceOp::kSum && bucket.grad_data.dtype == DType::kFloat32) {
      grad_handles_.push_back(group_->reduce_scatter_scaled(
          bucket.grad_shard(shard_index()), bucket.grad_data, bucket.gradient_scaling_factor));
      continue;
    }
    buffer_->memory().scale(bucket.grad_data, bucket.gradient_scaling_factor);
    if (reduce_scatter) {
      grad_handles_.push_back(
          group_->reduce_scatter(bucket.grad_shard(shard_index()), bucket.grad_data, op));
    } else {
      grad_handles_.push_back(group_->all_reduce(bucket.grad_data, op));
    }
  }
  grad_dispatched_ = true;
}

void BucketGroup::start_replica_reduce() {
  // Each bucket's reduced shard (sum or average over the shard group) is summed / averaged
  // across the replicas: the result is the reduction over all dp ranks.
  const ReduceOp op = config_->average_in_collective ? ReduceOp::kAvg : ReduceOp::kSum;
  for (int b : bucket_indices_) {
    const Bucket& bucket = buffer_->buckets()[static_cast<std::size_t>(b)];
    replica_handles_.push_back(replica_group_->all_reduce(bucket.grad_shard(shard_index()), op));
  }
  replica_dispatched_ = true;
}

bool BucketGroup::poll_replica_reduce() {
  if (replica_group_ == nullptr || replica_dispatched_) return true;
  if (!grad_dispatched_) return false;
  for (WorkPtr& handle : grad_handles_) {
    if (!handle->is_completed()) return false;
  }
  start_replica_reduce();
  return true;
}

namespace {

// Waits for every handle even if one fails; returns the first error.
std::exception_ptr wait_all(std::vector<WorkPtr>& handles) {
  std::exception_ptr first_error;
  for (WorkPtr& handle : handles) {
    try {
      handle->wait();
    } catch (...) {
      if (!first_error) first_error = std::current_exception();
    }
  }
  handles.clear();
  return first_error;
}

}  // namespace

void BucketGroup::finish_grad_sync() {
  SW_CHECK(grad_dispatched_, "bucket group ", index_, " waited on before it was dispatched");
  std::exception_ptr first_error = wait_all(grad_handles_);
  if (first_error) {
    // A shard that was never reduced is not all-reduced either.
    wait_all(replica_handles_);
    std::rethrow_exception(first_error);
  }
  if (replica_group_ != nullptr && !replica_dispatched_) start_replica_reduce();
  first_error = wait_all(replica_handles_);
  if (first_error) std::rethrow_exception(first_error);
}

void BucketGroup::reset_grad_sync() {
  for (WorkPtr& handle : grad_handles_) handle->wait();
  grad_handles_.clear();
  for (WorkPtr& handle : replica_handles_) handle->wait();
  replica_handles_.clear();
  grad_dispatched_ = false;
  replica_dispatched_ = false;
}

void BucketGroup::start_param_sync(bool async) {
  SW_CHECK(param_handles_.empty(), "bucket group ", index_, ": param gather already in flight");
  for (int b : bucket_indices_) {
    const Bucket& bucket = buffer_->buckets()[static_cast<std::size_t>(b)];
    param_handles_.push_back(
        group_->all_gather(bucket.param_data, bucket.param_shard(shard_index())));
  }
  param_dispatched_ = true;
  if (!async) finish_param_sync();
}

void BucketGroup::finish_param_sync() {
  std::exception_ptr first_error;
  for (WorkPtr& handle : param_handles_) {
    try {
      handle->wait();
    } catch (...) {
      if (!first_error) first_error = std::current_exception();
    }
  }
  param_handles_.clear();
  if (first_error) std::rethrow_exception(first_error);
}

void BucketGroup::reset_param_sync() {
  finish_param_sync();
  param_dispatched_ = false;
}

}  // namespace shardwise
