#include "shardwise/optim/buffer_routing.hpp"

namespace shardwise::optim {

bool bucket_is_managed_by_layer_wise_optimizer(const BufferKey& key, bool tagged,
                                               bool default_for_untagged) {
  return tagged ? key.is_layer_wise : default_for_untagged;
}

}  // namespace shardwise::optim
