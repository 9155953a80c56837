// DistributedDataParallel: owns one ParamAndGradBuffer per BufferKey of the optimizer's layout,
// groups their buckets into BucketGroups, and runs gradient sync (reduce-scatter with the
// distributed optimizer, all-reduce otherwise) and param sync (in-place all-gather) over the
// data-parallel group, or the expert-data-parallel group for expert buffers.
//
// Determinism: bucket groups are dispatched strictly in index order (backprop order) on every
// rank, whatever order grads become ready in, so every rank issues the same collective sequence.
// Not thread-safe: call from the thread that runs backward / the optimizer.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "shardwise/comm/process_group.hpp"
#include "shardwise/config/ddp_config.hpp"
#include "shardwise/ddp/bucket_group.hpp"
#include "shardwise/ddp/param_and_grad_buffer.hpp"
#include "shardwise/ddp/reproducible_reduction.hpp"
#include "shardwise/layout/param_info.hpp"
#include "shardwise/layout/param_layout.hpp"

namespace shardwise {

struct DataParallelGroups {
  ProcessGroupPtr data_parallel;
  ProcessGroupPtr expert_data_parallel;  // defaults to data_parallel when null

  static DataParallelGroups from(const ParallelGroups& groups) {
    return {groups.data_parallel, groups.expert_data_parallel};
  }
};

// Factor each bucket's grads are multiplied by before the collective: 1/dp with a summing
// collective; 1 (dense) and expert_dp/dp (expert) when averaging in the collective; 1 in
// per-token-loss mode.
struct GradientScaling {
  double dense = 1.0;
  double expert = 1.0;
  ReduceOp op = ReduceOp::kSum;
};
GradientScaling gradient_scaling(const DistributedDataParallelConfig& config, int dp,
                                 int expert_dp);

// Hash of everything ranks must agree on: buffer keys, param ranges, buckets, unpadded counts,
// shard counts, param names and shapes (FNV-1a, independent of pointer values).
std::uint64_t layout_hash(const ParamList& params, const FullParamLayout& layout);

// Owner map for legacy_param_sync when the optimizer has no layout-derived ownership: PR 4509's
// ping-pong assignment, dealt separately over the dense params (dp ranks) and the expert params
// (expert_dp ranks) of `layout`.
std::map<ParamId, int> ping_pong_owner_map(const ParamList& params, const FullParamLayout& layout,
                                           int dp, int expert_dp);

class DistributedDataParallel {
 public:
  // Validates the config and the layout against the params, checks that every rank of the DP
  // group (and expert-DP group) has the same layout (CommError on every rank otherwise), and
  // allocates the buffers. num_shards of each buffer must equal its group's size when grads are
  // reduce-scattered, except for a layer-wise (shard-aligned) buffer laid out for S shards, S
  // dividing its group's size: that buffer gets shard groups (make_shard_groups, collective over
  // the group), is reduce-scattered and all-gathered in its shard group of S consecutive ranks,
  // and its owned shards are all-reduced across the replica group. The buffers are allocated
  // from `memory` (host memory by default; device memory puts them, and every view DDP hands
  // out, on that device: the groups must then take device views, e.g. a HostStagedProcessGroup).
  DistributedDataParallel(ParamList params, FullParamLayout layout,
                          DistributedDataParallelConfig config, DataParallelGroups groups,
                          BufferMemoryPtr memory = host_buffer_memory());
  ~DistributedDataParallel();

  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  const DistributedDataParallelConfig& config() const { return config_; }
  const ParamList& params() const { return params_; }
  const FullParamLayout& layout() const { return layout_; }
  const GradientScaling& scaling() const { return scaling_; }
  const BufferMemory& memory() const { return *memory_; }
  const ProcessGroupPtr& data_parallel_group() const { return pgs_.data_parallel; }

  // --- buffers, buckets and groups, for optimizers ---
  const std::vector<std::unique_ptr<ParamAndGradBuffer>>& buffers() const { return buffers_; }
  // Buffer of a key; throws InvalidArgument when the layout has no such buffer.
  ParamAndGradBuffer& buffer(const BufferKey& key) const;
  ParamAndGradBuffer& buffer_of(ParamId param) const;
  // Bucket groups in dispatch (backprop) order: bucket_groups()[i]->index() == i.
  const std::vector<std::unique_ptr<BucketGroup>>& bucket_groups() const { return groups_; }
  int bucket_group_of(ParamId param) const;
  // The group a buffer's shards live in: its shard group for a buffer split over shard groups,
  // else the DP (or expert-DP) group.
  const ProcessGroupPtr& group_for(const BufferKey& key) const;
  // The replica group of a buffer split over shard groups (its shard is all-reduced across it);
  // null for every other buffer.
  const ProcessGroupPtr& replica_group_for(const BufferKey& key) const;
  // This rank's shard of bucket `bucket` of buffer `key`, in buffer coordinates.
  BucketRange local_shard_range(const BufferKey& key, int bucket) const;

  // Value and gradient (main_grad) of a param: views into the buffers.
  TensorView param(ParamId param) const;
  TensorView main_grad(ParamId param) const;

  // --- gradient sync ---
  // Marks a param's gradient as final for this iteration. With overlap_grad_reduce, dispatches
  // every bucket group that is complete and whose predecessors are dispatched. Ignored (after
  // checking the id) outside the last micro-batch. Throws InvalidArgument for an unknown param
  // or one registered twice in one iteration.
  void register_grad_ready(ParamId param);
  // Gradient accumulation: only the last micro-batch syncs.
  void set_is_last_microbatch(bool is_last) { is_last_microbatch_ = is_last; }
  bool is_last_microbatch() const { return is_last_microbatch_; }
  class NoSyncScope {
   public:
    explicit NoSyncScope(DistributedDataParallel* ddp);
    ~NoSyncScope();
    NoSyncScope(const NoSyncScope&) = delete;
    NoSyncScope& operator=(const NoSyncScope&) = delete;

   private:
    DistributedDataParallel* ddp_;
    bool previous_;
  };
  // Megatron's no_sync() context: grads accumulate locally while the scope lives.
  [[nodiscard]] NoSyncScope no_sync() { return NoSyncScope(this); }

  // Dispatches every group not yet dispatched (in index order) and waits for all of them. After
  // it, each rank's shard of every bucket (reduce-scatter) or the whole buffer (all-reduce)
  // holds the reduced, scaled gradient. With reproducible_reduction it instead sums the closed
  // micro-batches and the one in the buffers in the fixed tree order (ReproducibleGradReduction)
  // into every rank's whole buffers, scaled by 1/(dp * micro-batches) (none with
  // per_token_loss); every shard, owned or not, then holds the reduced gradient. Each call
  // reduces what the buffers hold (an iteration may write its grads without registering them),
  // so a second call over grads already reduced averages them again: zero_grad_buffer() (or
  // new grads) comes between.
  void finish_grad_sync();
  // reproducible_reduction only: the micro-batch whose grads are in the buffers is complete;
  // moves them aside and zeros the buffers (the caller's backward scales each micro-batch by 1,
  // not 1/micro-batches). Call it after every micro-batch but the last. InvalidArgument
  // without the option.
  void close_microbatch();
  // Most bytes the reproducible reduction held above the grad buffers (0 without it).
  std::int64_t reproducible_reduction_peak_bytes() const;
  // Issues, without waiting, the replica all-reduces (shard groups) whose reduce-scatter has
  // completed, in bucket-group order; register_grad_ready does this after every call. Returns
  // how many bucket groups (from index 0) have their whole grad sync issued this iteration.
  int poll_grad_sync();
  // Zeros every grad buffer and forgets this iteration's readiness (waits for outstanding work).
  void zero_grad_buffer();
  // Groups in the order this iteration dispatched them (for tests and tracing).
  const std::vector<int>& grad_dispatch_log() const { return grad_dispatch_log_; }

  // --- param sync (use_distributed_optimizer) ---
  // All-gathers every bucket's param shards in place. Without overlap_param_gather (or with
  // force_sync) it returns once every param is up to date. With overlap_param_gather it
  // dispatches asynchronously: the first group in forward order (or all of them with
  // align_param_gather); finish_param_sync(group) dispatches the next.
  void start_param_sync(bool force_sync = false);
  // Same, restricted to the groups `select` accepts (e.g. only layer-wise buffers).
  void start_param_sync_for_bucket_groups(const std::function<bool(const BucketGroup&)>& select,
                                          bool force_sync = false);
  // Dispatches the gather of one group now, asynchronously, and marks it requested, so
  // finish_param_sync(group_index) / finish_all_param_sync() wait for it (an optimizer that
  // overlaps the gathers with its step ships each group as soon as it has updated it). A gather
  // of that group still in flight completes first.
  void start_param_sync_for_group(int group_index);
  // Called by the forward pass before it uses the params of `group_index`: dispatches that
  // group's gather if needed, waits for it, then dispatches the next requested group in forward
  // order.
  void finish_param_sync(int group_index);
  // Waits for every requested gather (in forward order).
  void finish_all_param_sync();

  // --- legacy param sync (Megatron-LM PR 4509's baseline) ---
  // Each rank flattens the params it owns (owner: ParamId -> rank in the param's buffer group)
  // into a send buffer, all_gather_v's them, and copies every param back into its view.
  // Synchronous. Throws InvalidArgument for a param missing from `owner` or a rank out of range.
  void legacy_param_sync(const std::map<ParamId, int>& owner);

 private:
  struct Location {
    std::size_t buffer = 0;
    int group = 0;
  };
  const Location& location(ParamId param) const;
  void dispatch_ready_groups();
  void make_buffer_groups(const BufferKey& key, const PerBufferParamLayout& layout);
  void reset_iteration();
  std::vector<int> forward_order(const std::vector<bool>& selected) const;
  void dispatch_param_gather(int group_index, bool async);

  DistributedDataParallelConfig config_;
  ParamList params_;
  FullParamLayout layout_;
  DataParallelGroups pgs_;
  BufferMemoryPtr memory_;
  GradientScaling scaling_;
  std::vector<std::unique_ptr<ParamAndGradBuffer>> buffers_;
  std::vector<std::unique_ptr<BucketGroup>> groups_;
  std::map<BufferKey, std::size_t> buffer_index_;
  // Buffers split over shard groups: (shard group, replica group). One split per distinct
  // (expert, S), shared by the buffers that need it.
  std::map<BufferKey, std::pair<ProcessGroupPtr, ProcessGroupPtr>> shard_groups_;
  std::map<std::pair<bool, int>, std::pair<ProcessGroupPtr, ProcessGroupPtr>> shard_group_cache_;
  std::vector<std::optional<Location>> location_;  // per ParamId

  // Grad readiness of the current iteration.
  bool is_last_microbatch_ = true;
  bool counts_learnt_ = false;
  std::vector<bool> ready_;                   // per ParamId
  std::vector<bool> expected_param_;          // per ParamId; learnt on the first iteration
  std::vector<std::int64_t> ready_count_;     // per group
  std::vector<std::int64_t> expected_count_;  // per group; learnt on the first iteration
  std::vector<bool> complete_;                // per group
  int next_grad_dispatch_ = 0;
  int next_replica_dispatch_ = 0;  // first group whose replica all-reduce may not be issued yet
  std::vector<int> grad_dispatch_log_;

  // Param gathers requested by start_param_sync and not yet waited for.
  std::vector<bool> param_requested_;
  std::unique_ptr<ReproducibleGradReduction> reproducible_;  // with reproducible_reduction only
};

}  // namespace shardwise
