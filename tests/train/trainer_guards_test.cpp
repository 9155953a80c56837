// The trainer's start-up and pre-save checks on one rank: outputs preflighted and the save root
// locked (the lock held by the returned object), an impossible model refused, and a save refused
// when a weight is not finite.
#include "../../src/train/trainer_guards.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "ddp/fake_process_group.hpp"
#include "scratch_dir.hpp"
#include "shardwise/train/nonfinite_steps.hpp"

namespace shardwise::train_detail {
namespace {

using test::error_message_of;
using testing_support::FakeProcessGroup;

#define EXPECT_CONTAINS(text, part) \
  EXPECT_NE((text).find(part), std::string::npos) << "message: " << (text)

class TrainerGuards : public test::ScratchDirTest {};

TEST_F(TrainerGuards, OutputsArePreflightedAndTheSaveRootStaysLocked) {
  FakeProcessGroup world(0, 1);
  auto lock = prepare_outputs(world, {path("ckpt"), path("m.jsonl"), path("loss.svg")}, false);
  ASSERT_NE(lock, nullptr);
  EXPECT_CONTAINS(error_message_of([&] {
                    prepare_outputs(world, {path("ckpt"), "", ""}, false);
                  }),
                  "is in use by another job");
  lock.reset();
  EXPECT_NE(prepare_outputs(world, {path("ckpt"), "", ""}, false), nullptr);
  EXPECT_EQ(prepare_outputs(world, {"", "", ""}, false), nullptr);
  EXPECT_CONTAINS(error_message_of([&] {
                    prepare_outputs(world, {"", path("no/m.jsonl"), ""}, false);
                  }),
                  "--log-jsonl '" + path("no/m.jsonl") + "' is not writable");
}

TEST_F(TrainerGuards, ImpossibleModelIsRefused) {
  FakeProcessGroup world(0, 1);
  TrainingConfig config;
  GptConfig model;
  EXPECT_EQ(error_message_of([&] { require_memory(world, model, config, 1); }), "(no error)");
  model.num_layers = 1'000'000'000;
  EXPECT_CONTAINS(error_message_of([&] { require_memory(world, model, config, 1); }),
                  "MemAvailable");
}

TEST_F(TrainerGuards, SaveIsRefusedWhenAWeightIsNotFinite) {
  FakeProcessGroup group(0, 1);
  std::vector<float> a(6, 1.0f), b(4, 2.0f);
  const std::vector<ModelTensor> model = {{"a", {2, 3}, TensorView{a.data(), 6, DType::kFloat32}},
                                          {"b", {4}, TensorView{b.data(), 4, DType::kFloat32}}};
  EXPECT_EQ(error_message_of([&] { require_finite_weights(group, model, 7); }), "(no error)");
  b[2] = INFINITY;
  try {
    require_finite_weights(group, model, 7);
    ADD_FAILURE() << "an infinite weight was accepted";
  } catch (const NonFiniteTrainingError& e) {
    EXPECT_CONTAINS(std::string(e.what()), "step 7: the weights are not finite ('b' element 2");
  }
}

}  // namespace
}  // namespace shardwise::train_detail
