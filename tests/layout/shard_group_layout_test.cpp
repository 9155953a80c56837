// Layer-wise shard groups: the layer-wise buffers laid out for S shards (S divides dp); element-
// sharded buffers keep all of dp; S = dp is the single-group layout.
#include <gtest/gtest.h>

#include <algorithm>

#include "layout/layout_test_models.hpp"
#include "sanitizer_budget.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/layout/layout_algorithms.hpp"
#include "shardwise/layout/model_zoo.hpp"

namespace shardwise {
namespace {

using layout_test::megatron_options;

TEST(ShardGroups, OptionsRejectAGroupSizeThatDoesNotDivideDp) {
  LayoutOptions options = megatron_options(8);
  for (int bad : {0, -2, 3, 16}) {
    options.layer_wise_shard_group_size = bad;
    try {
      options.validate();
      ADD_FAILURE() << "accepted shard group size " << bad;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("layer_wise_shard_group_size"), std::string::npos);
    }
  }
  options.layer_wise_shard_group_size = 4;
  EXPECT_NO_THROW(options.validate());
}

TEST(ShardGroups, ZooLayoutsWithSEqualDpAreTheSingleGroupLayouts) {
  SW_SKIP_UNDER_SANITIZERS();
  for (const std::string& name : bundled_model_names()) {
    const ParamList params = bundled_model_spec(name).params;
    for (int dp : {8, 64}) {
      LayoutOptions options = megatron_options(dp);
      const FullParamLayout single = compute_full_param_layout(params, options);
      options.layer_wise_shard_group_size = dp;
      EXPECT_EQ(compute_full_param_layout(params, options), single) << name << " dp " << dp;
    }
  }
}

TEST(ShardGroups, ZooInvariantsHoldForEveryDivisorOfDp) {
  SW_SKIP_UNDER_SANITIZERS();
  const int dp = 8;
  for (const std::string& name : bundled_model_names()) {
    const ParamList params = bundled_model_spec(name).params;
    for (int s : {1, 2, 4}) {
      SCOPED_TRACE(str_cat(name, " S ", s));
      LayoutOptions options = megatron_options(dp);
      options.layer_wise_shard_group_size = s;
      const FullParamLayout layout = compute_full_param_layout(params, options);
      ASSERT_NO_THROW(validate_full_layout(params, layout, options));
      for (const auto& [key, buffer] : layout.layouts) {
        EXPECT_EQ(buffer.num_shards, key.is_layer_wise ? s : dp) << key.to_string();
        if (key.is_layer_wise) {
          EXPECT_NO_THROW(validate_layer_wise_bucket_cuts(params, buffer));
        }
      }
    }
  }
}

}  // namespace
}  // namespace shardwise
