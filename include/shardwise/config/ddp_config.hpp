// Settings of DistributedDataParallel (Megatron's DistributedDataParallelConfig) and the ddp
// section of a training config: one type, so the trainer hands config.ddp straight to the DDP
// wrapper. It lives in the config layer, below ddp/, which uses it.
//
// YAML keys of the section: grad_reduce_in_fp32, overlap_grad_reduce, overlap_param_gather,
// align_param_gather, use_distributed_optimizer, bucket_size, average_in_collective,
// pad_buckets_for_high_nccl_busbw, per_token_loss, use_legacy_layer_wise_sync (the member
// use_legacy_param_sync: the all_gather_v comparison path), num_buckets_per_group,
// layer_wise_shard_group_size, layer_wise_cuts, reproducible_reduction.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "shardwise/config/enum_names.hpp"
#include "shardwise/layout/layout_options.hpp"

namespace shardwise {

// ddp.layer_wise_cuts: how the layer-wise layout cuts buckets (LayoutOptions::overlap_aware_cuts).
enum class LayerWiseCuts { kOverlapAware, kPlain };
inline constexpr EnumName<LayerWiseCuts> kLayerWiseCutsNames[] = {
    {LayerWiseCuts::kOverlapAware, "overlap_aware"},
    {LayerWiseCuts::kPlain, "plain"},
};
inline std::span<const EnumName<LayerWiseCuts>> enum_names(LayerWiseCuts) {
  return kLayerWiseCutsNames;
}

// ddp.layer_wise_shard_group_size, spelt "dp", "auto" or a positive integer in configs.
struct LayerWiseShardGroupSize {
  enum class Kind { kDataParallel, kAuto, kRanks };
  Kind kind = Kind::kDataParallel;
  int ranks = 0;  // kRanks only

  static LayerWiseShardGroupSize data_parallel() { return {}; }
  static LayerWiseShardGroupSize automatic() { return {Kind::kAuto, 0}; }
  static LayerWiseShardGroupSize of(int ranks) { return {Kind::kRanks, ranks}; }
  // The config spelling; throws ConfigError naming the key for anything else.
  static LayerWiseShardGroupSize parse(std::string_view text);
  // "dp", "auto" or the number.
  std::string name() const;

  bool operator==(const LayerWiseShardGroupSize&) const = default;
};

struct DistributedDataParallelConfig {
  // Reduce gradients in fp32 (grad buffers are fp32 whatever the param dtype).
  bool grad_reduce_in_fp32 = true;
  // Dispatch a bucket group's collective as soon as all its grads are ready (during backward)
  // instead of at finish_grad_sync().
  bool overlap_grad_reduce = false;
  // Dispatch param all-gathers asynchronously; the forward pass calls finish_param_sync(group)
  // before it uses a group's params, which also dispatches the next group's gather.
  bool overlap_param_gather = false;
  // With overlap_param_gather: start_param_sync() dispatches every group's gather at once
  // instead of only the first (the rest follow the forward pass).
  bool align_param_gather = false;
  // Reduce-scatter grads into each rank's shard and all-gather params (DistributedOptimizer and
  // LayerWiseDistributedOptimizer); all-reduce grads otherwise.
  bool use_distributed_optimizer = false;
  // Approximate elements per bucket; nullopt = resolved by resolved_bucket_size().
  std::optional<std::int64_t> bucket_size;
  // Average in the collective (ReduceOp::kAvg) instead of pre-scaling by 1/dp and summing.
  bool average_in_collective = false;
  bool pad_buckets_for_high_nccl_busbw = false;
  // The loss is already summed per token and normalised by the caller: no gradient scaling.
  bool per_token_loss = false;
  // Seed 002's baseline: grads all-reduced over the whole buffer, params synced by an
  // all_gather_v of each rank's owned params (flatten / gather / unflatten).
  bool use_legacy_param_sync = false;
  // Consecutive buckets (in backprop order, within one buffer) per bucket group when
  // overlap_grad_reduce is on. Without overlap every buffer forms a single bucket group.
  int num_buckets_per_group = 1;
  // Layer-wise shard group size (LayoutOptions::layer_wise_shard_group_size): "dp" (one group,
  // the default), "auto", or a positive integer dividing dp. With S < dp the layer-wise buffers
  // are reduce-scattered / all-gathered inside shard groups of S consecutive DP ranks and the
  // owned shard is all-reduced across the dp/S replicas (docs/shard_groups.md).
  LayerWiseShardGroupSize layer_wise_shard_group_size;
  // How the layer-wise layout cuts buckets: overlap_aware (the default: padding plus the last
  // bucket's exposed reduce-scatter) or plain (padding only, the layouts from before
  // overlap-aware cuts).
  LayerWiseCuts layer_wise_cuts = LayerWiseCuts::kOverlapAware;
  // Sum the gradients of the step's global micro-batches in one fixed order (a balanced tree over
  // the global micro-batch index) instead of letting the collective choose, so losses, grad norms
  // and weights are bit-identical at every power-of-two dp (docs/reproducible_reduction.md).
  // Costs one grad-buffer copy per micro-batch and an all-gather of whole grad buffers; nothing
  // is reduced during backward (overlap_grad_reduce has no effect under it).
  bool reproducible_reduction = false;
  // Host param and grad buffers in symmetric memory of their group (shared memory every rank of
  // a one-node group maps; shardwise/comm/symmetric_memory.hpp), so the grad reduce-scatter and
  // the param all-gather read the peers' buckets in place instead of copying them through the
  // group's segment (docs/collectives.md). Megatron's counterpart for NCCL is nccl_ub. No effect
  // on device buffers or groups spanning nodes; falls back to private memory when /dev/shm is
  // short (with a warning).
  bool symmetric_buffers = true;

  // Megatron's default: max(40M, 1M * dp) elements with overlap_grad_reduce, a single bucket
  // (nullopt) without. An explicit bucket_size wins.
  std::optional<std::int64_t> resolved_bucket_size(int data_parallel_size) const;

  // Whether grads are reduce-scattered (true) or all-reduced (false).
  bool reduce_scatter_grads() const { return use_distributed_optimizer && !use_legacy_param_sync; }

  // The one validator of these settings, used by the config loader and the DDP wrapper alike.
  // Throws ConfigError naming the key ("ddp.bucket_size must be >= 1"): bucket_size < 1,
  // num_buckets_per_group < 1, align_param_gather without overlap_param_gather,
  // overlap_param_gather without the distributed optimizer, per_token_loss together with
  // average_in_collective, a layer_wise_shard_group_size of fewer than one rank,
  // reproducible_reduction with grads below fp32.
  void validate() const;

  // The checks that need the run's dp: ddp.layer_wise_shard_group_size must divide dp. Throws
  // ConfigError naming the key.
  void validate_for_data_parallel_size(int data_parallel_size) const;
  // The shard group size as a number; nullopt for "dp" and "auto".
  std::optional<int> explicit_layer_wise_shard_group_size() const;
  bool automatic_layer_wise_shard_group_size() const {
    return layer_wise_shard_group_size.kind == LayerWiseShardGroupSize::Kind::kAuto;
  }

  // LayoutOptions the layout algorithms need for this config (bucket size resolved for dp, an
  // explicit shard group size S < dp set; "auto" left unset for the caller to choose);
  // runs validate_for_data_parallel_size(dp) first.
  LayoutOptions layout_options(LayoutAlgorithm algorithm, int data_parallel_size,
                               std::optional<int> expert_data_parallel_size = std::nullopt) const;
};

// Field-by-field equality over every key of the section.
bool same_ddp_settings(const DistributedDataParallelConfig& a,
                       const DistributedDataParallelConfig& b);

}  // namespace shardwise
