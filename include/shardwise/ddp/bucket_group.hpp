// BucketGroup: buckets of one buffer whose collectives are dispatched together once every param
// in the group has its gradient ready (Megatron's _ParamAndGradBucketGroup). Groups are plain
// bookkeeping; DistributedDataParallel decides when to dispatch them.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "shardwise/comm/process_group.hpp"
#include "shardwise/config/ddp_config.hpp"
#include "shardwise/ddp/param_and_grad_buffer.hpp"

namespace shardwise {

// Which buckets of which buffers form the bucket groups, in dispatch order.
struct BucketGroupPlan {
  std::size_t buffer = 0;    // index into the DDP's buffer list
  std::vector<int> buckets;  // consecutive bucket indices of that buffer
};

// Forms bucket groups: with overlap_grad_reduce, runs of num_buckets_per_group consecutive buckets
// of one buffer; without, one group per buffer. Groups are ordered by when backprop completes
// them: descending smallest ParamId (backprop visits params in reverse forward order), ties
// broken by buffer then bucket index, so the order depends only on the layout and is the same on
// every rank. Within a buffer the order is the buffer's bucket order.
std::vector<BucketGroupPlan> plan_bucket_groups(
    const std::vector<const ParamAndGradBuffer*>& buffers,
    const DistributedDataParallelConfig& config);

class BucketGroup {
 public:
  // `replica_group` (null for none): a layer-wise buffer split over a shard group smaller than
  // dp; after the reduce-scatter in `group` (the shard group) each rank all-reduces its shard
  // across the replicas.
  BucketGroup(int index, ParamAndGradBuffer* buffer, std::vector<int> bucket_indices,
              ProcessGroupPtr group, const DistributedDataParallelConfig* config,
              ProcessGroupPtr replica_group = nullptr);

  int index() const { return index_; }
  const BufferKey& key() const { return buffer_->key(); }
  ParamAndGradBuffer& buffer() const { return *buffer_; }
  const std::vector<int>& bucket_indices() const { return bucket_indices_; }
  std::vector<const Bucket*> buckets() const;
  const std::vector<ParamId>& params() const { return params_; }
  const ProcessGroupPtr& group() const { return group_; }
  const ProcessGroupPtr& replica_group() const { return replica_group_; }
  // This rank's shard index in the group's buckets (its rank in the DP / expert-DP group, or in
  // its shard group).
  int shard_index() const { return group_->rank(); }
  bool contains(ParamId param) const;

  // --- gradient sync ---
  // Scales each bucket's grads and issues its reduce-scatter (in place into this rank's shard)
  // or all-reduce; asynchronous. Throws if already dispatched this iteration.
  void start_grad_sync();
  bool grad_sync_dispatched() const { return grad_dispatched_; }
  // With a replica group: issues the all-reduce of this rank's shards across the replicas once
  // the reduce-scatter has completed (never waits). Returns whether nothing of this group's
  // grad sync is left to issue (true at once without a replica group).
  bool poll_replica_reduce();
  // Waits for the group's grad collectives (issuing the replica all-reduce first if needed).
  void finish_grad_sync();

  // --- param sync (distributed optimizer only) ---
  // All-gathers every bucket's param shards in place. async=false waits before returning.
  void start_param_sync(bool async);
  bool param_sync_dispatched() const { return param_dispatched_; }
  bool param_sync_pending() const { return !param_handles_.empty(); }
  void finish_param_sync();
  // Forget the "dispatched" marks (after waiting for everything outstanding).
  void reset_param_sync();

  // Waits for anything outstanding and forgets this iteration's grad state.
  void reset_grad_sync();

 private:
  int index_;
  ParamAndGradBuffer* buffer_;
  std::vector<int> bucket_indices_;
  ProcessGroupPtr group_;
  const DistributedDataParallelConfig* config_;
  ProcessGroupPtr replica_group_;
  std::vector<ParamId> params_;  // backprop order
  void start_replica_reduce();

  std::vector<WorkPtr> grad_handles_;
  std::vector<WorkPtr> replica_handles_;
  std::vector<WorkPtr> param_handles_;
  bool replica_dispatched_ = false;
  bool grad_dispatched_ = false;
  bool param_dispatched_ = false;
};

}  // namespace shardwise
