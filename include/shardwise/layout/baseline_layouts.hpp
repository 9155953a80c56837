// Reference algorithms kept for comparison (tests and benchmarks measure ours against them).
#pragma once

#include "shardwise/layout/layout_algorithms.hpp"

namespace shardwise {

// Megatron-LM's current layer-wise (shard-aligned) layout: walk backprop order accumulating a
// chunk; a shared embedding finalises the chunk and gets an isolated bucket; once the chunk holds
// >= bucket_size elements (or the params run out) it is bin-packed: params largest-first by
// Newton–Schulz cost onto the least-loaded shard whose load stays within 1.3x the mean shard load
// (else the least-loaded shard), loads counted in 64-aligned footprints; every shard is padded to
// the largest load rounded up to the shard divisor. Shard b goes to rank b.
PerBufferParamLayout compute_megatron_layer_wise_layout(const BufferLayoutInput& input);

}  // namespace shardwise
