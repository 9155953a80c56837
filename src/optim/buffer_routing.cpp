#include "shardwise/optim/buffer_routing.hpp"

namespace shardwise::optim {

bool bucket_is_managed_by_layer_wise_optimizer(const BufferKey& key, BufferTagging tagging,
                                               AskingOptimizer asking) {
  if (tagging == BufferTagging::kTagged) return key.is_layer_wise;
  return asking == AskingOptimizer::kLayerWise;
}

}  // namespace shardwise::optim
