// The non-finite step policy: skip up to training.skip_nonfinite_steps steps whose loss or grad
// norm is NaN/inf, then stop with a message naming the step.
#include "shardwise/train/nonfinite_steps.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "ddp/fake_process_group.hpp"
#include "scratch_dir.hpp"

namespace shardwise {
namespace {

using test::error_message_of;

#define EXPECT_CONTAINS(text, part) \
  EXPECT_NE((text).find(part), std::string::npos) << "message: " << (text)

TEST(NonFiniteSteps, SkipsUpToTheAllowanceThenStopsNamingTheStep) {
  testing_support::FakeProcessGroup group(0, 1);
  NonFiniteSteps none(0);
  EXPECT_FALSE(none.skip_step(group, 1, 2.0, 1.0));
  std::string m = error_message_of([&] { none.skip_step(group, 2, NAN, 1.0); });
  EXPECT_CONTAINS(m, "step 2: non-finite training state (loss nan");
  EXPECT_CONTAINS(m, "no checkpoint is saved");
  EXPECT_CONTAINS(m, "training.skip_nonfinite_steps=0");
  EXPECT_CONTAINS(m, "try a lower optimizer.lr");

  NonFiniteSteps two(2);
  EXPECT_TRUE(two.skip_step(group, 3, 1.0, INFINITY));
  EXPECT_FALSE(two.skip_step(group, 4, 1.0, 1.0));
  EXPECT_TRUE(two.skip_step(group, 5, NAN, NAN));
  EXPECT_EQ(two.skipped(), 2);
  try {
    two.skip_step(group, 6, -INFINITY, 1.0);
    ADD_FAILURE() << "a third non-finite step was accepted";
  } catch (const NonFiniteTrainingError& e) {
    EXPECT_CONTAINS(std::string(e.what()), "step 6:");
    EXPECT_CONTAINS(std::string(e.what()), "2 step(s) skipped before");
  }
}

// Step 1 runs on the initial weights: model.init_std=1e300 was blamed on the learning rate.
TEST(NonFiniteSteps, FirstStepPointsAtTheInitialWeightsNotTheLearningRate) {
  testing_support::FakeProcessGroup group(0, 1);
  NonFiniteSteps none(0);
  const std::string m = error_message_of([&] { none.skip_step(group, 1, NAN, NAN); });
  EXPECT_CONTAINS(m, "step 1: non-finite training state");
  EXPECT_CONTAINS(m, "check model.init_std");
  EXPECT_EQ(m.find("optimizer.lr"), std::string::npos) << m;
}

}  // namespace
}  // namespace shardwise
