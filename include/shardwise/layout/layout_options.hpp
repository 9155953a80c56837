// Inputs of the layout algorithms: the DDP settings that influence where params go.
#pragma once

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

  int expert_dp() const { return expert_data_parallel_size.value_or(data_parallel_size); }
  // Throws InvalidArgument naming the field for dp < 1, expert dp < 1, bucket_size < 1.
  void validate() const;
};

}  // namespace shardwise
