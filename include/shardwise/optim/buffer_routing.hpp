// Which optimizer owns which DDP buffer (Megatron-Core's
// _bucket_is_managed_by_layer_wise_optimizer).
#pragma once

#include "shardwise/layout/param_layout.hpp"

namespace shardwise::optim {

// Whether the layout tagged its buffers with is_layer_wise (the layer-wise layout routes params
// and does; the plain DDP layout does not).
enum class BufferTagging { kTagged, kUntagged };
// Which optimizer asks about a buffer.
enum class AskingOptimizer { kLayerWise, kElementSharded };

// Buffers are built from params sharing a BufferKey, so the key answers for all its buckets.
// Tagged buffers follow key.is_layer_wise. Untagged (legacy) buffers answer the side that asks:
// true for the layer-wise optimizer (it owned everything), false for the element-sharded
// DistributedOptimizer.
bool bucket_is_managed_by_layer_wise_optimizer(const BufferKey& key, BufferTagging tagging,
                                               AskingOptimizer asking);

}  // namespace shardwise::optim
