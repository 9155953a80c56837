// Inputs of the layout algorithms: the DDP settings that influence where params go.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>

namespace shardwise {

enum class LayoutAlgorithm {
  kDefault,      // plain DDP: no padding, buckets close once they reach bucket_size
  kDistributed,  // DistributedOptimizer: element-sharded, 64-aligned starts, padded bucket ends
  kLayerWise,    // LayerWiseDistributedOptimizer: shard-aligned buffers for Muon-managed params,
                 // DistributedOptimizer layout for the rest
};

struct LayoutOptions {
  LayoutAlgorithm algorithm = LayoutAlgorithm::kLayerWise;
  int data_parallel_size = 1;
  std::optional<int> expert_data_parallel_size;  // defaults to data_parallel_size
  // Approximate elements per bucket; nullopt = one bucket per buffer.
  std::optional<std::int64_t> bucket_size;
  bool grad_reduce_in_fp32 = true;
  bool pad_buckets_for_high_nccl_busbw = false;
  // With kLayerWise: put every buffer (not only Muon-managed ones) through the shard-aligned
  // layout.
  bool all_layer_wise = false;
  // Layer-wise shard groups: the shard-aligned (layer-wise) buffers are laid out for this many
  // shards; the DP group splits into dp / S replica groups of S consecutive ranks (rank r holds
  // shard r % S). nullopt = dp (one group, the plain layer-wise layout). Element-sharded buffers
  // keep full-dp sharding. Must divide dp; expert layer-wise buffers use gcd(S, expert dp) (all
  // of expert dp when S = dp).
  std::optional<int> layer_wise_shard_group_size;
  // Layer-wise buffers: cut buckets by padding plus the reduce-scatter bytes of the last-dispatched
  // bucket (which cannot overlap with backward), so a buffer that packs well as one bucket may
  // still be cut in several. On by default; false = the plain cut search (padding only), which
  // reproduces the layouts from before overlap-aware cuts existed.
  bool overlap_aware_cuts = true;

  int expert_dp() const { return expert_data_parallel_size.value_or(data_parallel_size); }
  int shard_group_size() const { return layer_wise_shard_group_size.value_or(data_parallel_size); }
  // Shards of a buffer over a DP group of `group_dp` ranks: element-sharded buffers use the whole
  // group, layer-wise buffers gcd(S, group_dp) (group_dp when S = dp).
  int num_shards_for(bool layer_wise, int group_dp) const;
  // Throws InvalidArgument naming the field for dp < 1, expert dp < 1, bucket_size < 1, or a
  // shard group size that is < 1 or does not divide dp.
  void validate() const;
};

// Megatron's default bucket size when grads are reduced during backward: max(40M, 1M * dp)
// elements, so that buckets grow with dp and each rank's shard stays large enough to send well.
inline std::int64_t default_bucket_size(int data_parallel_size) {
  return std::max<std::int64_t>(40'000'000, std::int64_t{1'000'000} * data_parallel_size);
}

}  // namespace shardwise
