// Reference algorithms kept for comparison (tests and benchmarks measure ours against them).
#pragma once

#include "shardwise/layout/layout_algorithms.hpp"

namespace shardwise {

// LPT + padding-floor shard-aligned layout: the rule of Megatron-LM's
// LayerWiseDistributedOptimizer._compute_per_buffer_param_layout (2026 HEAD), re-implemented.
// Named for what it does because on our bundled specs it reproduces one of the padding figures
// reported for Megatron-LM (llama3-70b) but not the others (README, "Benchmarks"). Walk backprop
// order accumulating a chunk; a shared embedding finalises the chunk and gets a bucket of its own,
// alone in shard 0 with the other shards padded to its size; a chunk is finalised once its numel
// reaches max(bucket_size, int(dp * largest param * 0.9)) (the padding floor, which lets a chunk
// that one large param dominates grow until padding is bounded), or when the params run out. Each
// chunk is packed LPT by numel (largest first, ties in backprop order, onto the first least-loaded
// shard, loads counted with 64-aligned starts); every shard is padded to the largest load rounded
// up to the shard divisor. Shard s goes to rank s; inside a shard params follow the packing order.
PerBufferParamLayout compute_lpt_floor_layer_wise_layout(const BufferLayoutInput& input);

}  // namespace shardwise
