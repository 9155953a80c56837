// Which optimizer owns which DDP buffer (Megatron-Core's
// _bucket_is_managed_by_layer_wise_optimizer).
#pragma once

#include "shardwise/layout/param_layout.hpp"

namespace shardwise::optim {

// Buffers are built from params sharing a BufferKey, so the key answers for all its buckets.
// `tagged` says whether params were routed (the layout came from the layer-wise algorithm, which
// tags buffers with is_layer_wise). Untagged (legacy) layouts fall back to default_for_untagged:
// the layer-wise side asks with true (it owned everything), the DistOpt side with false.
bool bucket_is_managed_by_layer_wise_optimizer(const BufferKey& key, bool tagged,
                                               bool default_for_untagged);

}  // namespace shardwise::optim
