// ddp.layer_wise_shard_group_size: parsed and printed like every ddp key, validated against dp,
// and handed to the layout (S < dp set, S = dp and "auto" unset for the caller to resolve).
#include <gtest/gtest.h>

#include <functional>

#include "shardwise/config/training_config.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise {
namespace {

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(ShardGroupConfig, DefaultIsOneGroupAndLaysOutAsBefore) {
  const TrainingConfig cfg = parse_training_config("");
  EXPECT_EQ(cfg.ddp.layer_wise_shard_group_size, LayerWiseShardGroupSize::data_parallel());
  const LayoutOptions options = cfg.ddp.layout_options(LayoutAlgorithm::kLayerWise, 8);
  EXPECT_FALSE(options.layer_wise_shard_group_size.has_value());
  EXPECT_NE(to_yaml(cfg).find("layer_wise_shard_group_size: dp"), std::string::npos)
      << to_yaml(cfg);
}

TEST(ShardGroupConfig, BadValuesNameTheKey) {
  for (const char* bad : {"four", "0", "-2", "2.5", "99999999999"}) {
    SCOPED_TRACE(bad);
    const std::string message = error_of([&] {
      parse_training_config(std::string("ddp: {layer_wise_shard_group_size: '") + bad + "'}");
    });
    EXPECT_NE(message.find("ddp.layer_wise_shard_group_size must be dp, auto or a positive"),
              std::string::npos)
        << message;
  }
}

TEST(ShardGroupConfig, SpellingsRoundTripAndASizeBelowOneIsRejected) {
  for (const char* text : {"dp", "auto", "1", "12"}) {
    EXPECT_EQ(LayerWiseShardGroupSize::parse(text).name(), text);
  }
  EXPECT_EQ(LayerWiseShardGroupSize::parse("dp"), LayerWiseShardGroupSize::data_parallel());
  EXPECT_EQ(LayerWiseShardGroupSize::parse("auto"), LayerWiseShardGroupSize::automatic());
  EXPECT_EQ(LayerWiseShardGroupSize::parse("12"), LayerWiseShardGroupSize::of(12));
  DistributedDataParallelConfig config;
  config.layer_wise_shard_group_size = LayerWiseShardGroupSize::of(0);
  const std::string message = error_of([&] { config.validate(); });
  EXPECT_NE(message.find("ddp.layer_wise_shard_group_size must be dp, auto or a positive integer "
                         "(got '0')"),
            std::string::npos)
      << message;
}

TEST(ShardGroupConfig, GroupSizeReachesTheLayoutOptionsAndMustDivideDp) {
  const TrainingConfig cfg = parse_training_config("ddp: {layer_wise_shard_group_size: 4}");
  EXPECT_EQ(cfg.ddp.layer_wise_shard_group_size, LayerWiseShardGroupSize::of(4));
  // Printed as the string it always was, and read back as the same size.
  EXPECT_NE(to_yaml(cfg).find("layer_wise_shard_group_size: \"4\""), std::string::npos)
      << to_yaml(cfg);
  EXPECT_EQ(parse_training_config(to_yaml(cfg)).ddp.layer_wise_shard_group_size,
            LayerWiseShardGroupSize::of(4));
  EXPECT_EQ(cfg.ddp.explicit_layer_wise_shard_group_size(), 4);
  // S = dp is today's layout: left unset, so layouts stay bit-identical.
  EXPECT_FALSE(cfg.ddp.layout_options(LayoutAlgorithm::kLayerWise, 4)
                   .layer_wise_shard_group_size.has_value());
  const LayoutOptions smaller = cfg.ddp.layout_options(LayoutAlgorithm::kLayerWise, 8);
  EXPECT_EQ(smaller.layer_wise_shard_group_size, 4);
  EXPECT_EQ(smaller.shard_group_size(), 4);
  const std::string not_dividing =
      error_of([&] { cfg.ddp.layout_options(LayoutAlgorithm::kLayerWise, 6); });
  EXPECT_NE(not_dividing.find("ddp.layer_wise_shard_group_size 4 does not divide"),
            std::string::npos)
      << not_dividing;
  const TrainingConfig automatic =
      parse_training_config("", {"ddp.layer_wise_shard_group_size=auto"});
  EXPECT_TRUE(automatic.ddp.automatic_layer_wise_shard_group_size());
  EXPECT_FALSE(automatic.ddp.layout_options(LayoutAlgorithm::kLayerWise, 8)
                   .layer_wise_shard_group_size.has_value());
}

}  // namespace
}  // namespace shardwise
