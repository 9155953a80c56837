// The layout algorithms. Each takes the params of one buffer in forward order and returns a
// PerBufferParamLayout in backprop order.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "shardwise/layout/layout_options.hpp"
#include "shardwise/layout/param_info.hpp"
#include "shardwise/layout/param_layout.hpp"

namespace shardwise {

struct BufferLayoutInput {
  const ParamList* params = nullptr;        // the whole model
  std::vector<ParamId> buffer_params;       // this buffer's params, forward order
  std::vector<std::int64_t> param_indices;  // parallel to buffer_params (may be empty)
  std::optional<std::int64_t> bucket_size;  // nullopt = single bucket
  int data_parallel_size = 1;               // dp (or expert dp) of this buffer
  bool pad_for_high_nccl_busbw = false;
  // Layer-wise layout: weigh the last bucket's (non-overlappable) reduce-scatter against padding
  // when cutting buckets (see LayoutOptions::overlap_aware_cuts; on by default there and here).
  bool overlap_aware_cuts = true;
};

// Plain DDP: contiguous, no padding; a bucket closes once it holds >= bucket_size elements.
PerBufferParamLayout compute_default_layout(const BufferLayoutInput& input);

// DistributedOptimizer: 64-element param starts; a bucket closes once end - bucket_start >=
// bucket_size; bucket ends padded with pad_bucket_end; a shared embedding closes the running
// bucket (at its 64-aligned start) and gets a bucket of its own. per_bucket_numel_unpadded is
// Megatron's count: closing index - bucket start, alignment gaps between params included (three
// params of 5000, bucket_size 8000, dp 2: buckets (0,10112) (10112,15232), unpadded 10056, 5000).
PerBufferParamLayout compute_dist_opt_layout(const BufferLayoutInput& input);

// LayerWiseDistributedOptimizer: shard-aligned buckets (no param crosses a shard boundary; equal
// shards, a multiple of layer_wise_shard_divisor), contiguous in backprop order, shared
// embeddings isolated, bucket_size a soft minimum (params that fit into a bucket's shard padding
// join it; ends are chosen where the bucket packs best), shards balanced by numel and by
// Newton–Schulz cost across the whole buffer. per_bucket_numel_unpadded is the sum of the
// bucket's param numels. Deterministic. Without overlap_aware_cuts (the plain cut search) it
// never pads more than cutting where Megatron-LM does; with them (the default) the cuts also
// weigh the last bucket's exposed reduce-scatter, for at most half a point more padding (see
// layer_wise_layout.cpp).
PerBufferParamLayout compute_layer_wise_layout(const BufferLayoutInput& input);

// Groups params by BufferKey and runs the algorithm each buffer needs (see LayoutAlgorithm).
FullParamLayout compute_full_param_layout(const ParamList& params, const LayoutOptions& options);

// Legacy fallback when no layout exists: stable sort by numel ascending, deal to ranks
// 0..n-1 then n-1..0, repeating. Returns the params each rank owns (dense and expert params are
// dealt separately by the caller).
std::vector<std::vector<ParamId>> ping_pong_shard_assignment(const ParamList& params,
                                                             const std::vector<ParamId>& ids,
                                                             int num_ranks);

// Checks every invariant of a layout (bucket contiguity and alignment, param alignment, bucket
// ids non-decreasing in backprop order, unpadded counts, and for shard-aligned layouts: equal
// shard sizes multiple of the shard divisor, no param crossing a shard boundary, shared embeddings
// alone in their bucket). Throws InvariantError naming the first violation.
void validate_layout(const ParamList& params, const PerBufferParamLayout& layout,
                     const BufferKey& key, const LayoutOptions& options);
void validate_full_layout(const ParamList& params, const FullParamLayout& layout,
                          const LayoutOptions& options);

// The bucket-cut rule of our shard-aligned layout (on top of validate_layout's invariants, which
// any shard-aligned layout, Megatron's included, satisfies): bucket_size is a soft minimum, so the
// first param of a bucket must not fit into the padding of any shard of the previous bucket
// (shared-embedding buckets excepted). Throws InvariantError naming the param.
void validate_layer_wise_bucket_cuts(const ParamList& params, const PerBufferParamLayout& layout);

}  // namespace shardwise
