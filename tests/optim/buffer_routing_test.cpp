// Which optimizer owns a DDP buffer: tagged layouts answer by the key's layer-wise flag, untagged
// (legacy) ones by the side asking.
#include "shardwise/optim/buffer_routing.hpp"

#include <gtest/gtest.h>

namespace shardwise::optim {
namespace {

TEST(BufferRouting, TaggedBuffersFollowTheLayerWiseFlag) {
  BufferKey matrices{DType::kBFloat16, DType::kFloat32, false, true};
  BufferKey others{DType::kBFloat16, DType::kFloat32, false, false};
  for (AskingOptimizer asking : {AskingOptimizer::kLayerWise, AskingOptimizer::kElementSharded}) {
    EXPECT_TRUE(
        bucket_is_managed_by_layer_wise_optimizer(matrices, BufferTagging::kTagged, asking));
    EXPECT_FALSE(bucket_is_managed_by_layer_wise_optimizer(others, BufferTagging::kTagged, asking));
  }
}

TEST(BufferRouting, UntaggedBuffersGoToTheSideThatAsks) {
  // Legacy layouts carry no layer-wise flag: asked by the layer-wise side the answer is yes (it
  // owns every buffer), asked by the DistributedOptimizer side no (negated, it also owns every
  // buffer), whatever the key's flag says.
  for (bool flag : {true, false}) {
    BufferKey key{DType::kBFloat16, DType::kFloat32, false, flag};
    EXPECT_TRUE(bucket_is_managed_by_layer_wise_optimizer(key, BufferTagging::kUntagged,
                                                          AskingOptimizer::kLayerWise));
    EXPECT_FALSE(bucket_is_managed_by_layer_wise_optimizer(key, BufferTagging::kUntagged,
                                                           AskingOptimizer::kElementSharded));
  }
}

}  // namespace
}  // namespace shardwise::optim
