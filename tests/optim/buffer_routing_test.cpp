// Which optimizer owns a DDP buffer: tagged layouts answer by the key's layer-wise flag, untagged
// (legacy) ones by the side asking.
#include "shardwise/optim/buffer_routing.hpp"

#include <gtest/gtest.h>

namespace shardwise::optim {
namespace {

TEST(BufferRouting, TaggedBuffersFollowTheLayerWiseFlag) {
  BufferKey matrices{DType::kBFloat16, DType::kFloat32, false, true};
  BufferKey others{DType::kBFloat16, DType::kFloat32, false, false};
  for (bool default_for_untagged : {true, false}) {
    EXPECT_TRUE(bucket_is_managed_by_layer_wise_optimizer(matrices, true, default_for_untagged));
    EXPECT_FALSE(bucket_is_managed_by_layer_wise_optimizer(others, true, default_for_untagged));
  }
}

TEST(BufferRouting, UntaggedBuffersGoToTheSideThatAsks) {
  // Legacy layouts carry no layer-wise flag: the layer-wise side asks with true and owns every
  // buffer, the DistributedOptimizer side asks with false and, negated, also owns every buffer.
  for (bool flag : {true, false}) {
    BufferKey key{DType::kBFloat16, DType::kFloat32, false, flag};
    EXPECT_TRUE(bucket_is_managed_by_layer_wise_optimizer(key, false, true));
    EXPECT_FALSE(bucket_is_managed_by_layer_wise_optimizer(key, false, false));
  }
}

}  // namespace
}  // namespace shardwise::optim
