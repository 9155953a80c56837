// ddp.layer_wise_cuts: overlap_aware (default) or plain, parsed and printed like every ddp key,
// validated, and handed to the layout as LayoutOptions::overlap_aware_cuts.
#include <gtest/gtest.h>

#include "shardwise/config/training_config.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise {
namespace {

TEST(LayerWiseCutsConfig, DefaultIsOverlapAware) {
  const TrainingConfig cfg = parse_training_config("");
  EXPECT_EQ(cfg.ddp.layer_wise_cuts, LayerWiseCuts::kOverlapAware);
  EXPECT_TRUE(cfg.ddp.layout_options(LayoutAlgorithm::kLayerWise, 8).overlap_aware_cuts);
  EXPECT_NE(to_yaml(cfg).find("layer_wise_cuts: overlap_aware"), std::string::npos) << to_yaml(cfg);
}

TEST(LayerWiseCutsConfig, PlainTurnsOverlapAwareCutsOffAndRoundTrips) {
  const TrainingConfig cfg = parse_training_config("ddp: {layer_wise_cuts: plain}");
  EXPECT_EQ(cfg.ddp.layer_wise_cuts, LayerWiseCuts::kPlain);
  EXPECT_FALSE(cfg.ddp.layout_options(LayoutAlgorithm::kLayerWise, 8).overlap_aware_cuts);
  const TrainingConfig again = parse_training_config(to_yaml(cfg));
  EXPECT_EQ(again.ddp.layer_wise_cuts, LayerWiseCuts::kPlain);
  EXPECT_FALSE(same_ddp_settings(cfg.ddp, parse_training_config("").ddp));
  const TrainingConfig overridden = parse_training_config("", {"ddp.layer_wise_cuts=plain"});
  EXPECT_EQ(overridden.ddp.layer_wise_cuts, LayerWiseCuts::kPlain);
}

TEST(LayerWiseCutsConfig, UnknownModeNamesTheKey) {
  try {
    parse_training_config("ddp: {layer_wise_cuts: greedy}");
    FAIL() << "accepted layer_wise_cuts: greedy";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "ddp.layer_wise_cuts: unknown value 'greedy' (valid: overlap_aware, plain)"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace shardwise
