#include <gtest/gtest.h>

#include <string>

#include "shardwise/config/training_config.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise {
namespace {

TEST(ReproducibleReductionConfig, OffByDefaultAndReadFromTheDdpSection) {
  EXPECT_FALSE(parse_training_config("").ddp.reproducible_reduction);
  const TrainingConfig on = parse_training_config("ddp: {reproducible_reduction: true}");
  EXPECT_TRUE(on.ddp.reproducible_reduction);
  EXPECT_FALSE(same_ddp_settings(on.ddp, parse_training_config("").ddp));
  EXPECT_TRUE(parse_training_config(to_yaml(on)).ddp.reproducible_reduction);
}

TEST(ReproducibleReductionConfig, NeedsFp32GradReduction) {
  try {
    parse_training_config("ddp: {reproducible_reduction: true, grad_reduce_in_fp32: false}");
    ADD_FAILURE() << "accepted bf16 grad reduction";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("ddp.grad_reduce_in_fp32"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace shardwise
