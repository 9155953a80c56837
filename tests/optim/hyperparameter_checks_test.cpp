// Hyperparameters given through the C++ API get the range checks of the YAML and Python front
// ends (config/optimizer_hyperparameters.hpp).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "shardwise/core/error.hpp"
#include "shardwise/optim/adamw.hpp"
#include "shardwise/optim/muon.hpp"

namespace shardwise::optim {
namespace {

// Each of these turned every param into NaN (or, for the step count, ran for ever) while step()
// reported a step.
TEST(OptimizerHyperparameters, OutOfRangeValuesAreRefusedNamingTheField) {
  std::vector<float> w(8, 1.0f), g(8, 0.0f);
  const auto groups = [&] { return single_group({{"w", {4, 2}, w.data(), g.data(), {}}}); };
  const auto refused = [](const std::function<void()>& make, const std::string& field) {
    try {
      make();
      ADD_FAILURE() << field << ": no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    }
  };
  refused([&] { AdamW(groups(), AdamWOptions{.beta1 = 1.0}); }, "AdamWOptions.beta1");
  refused([&] { AdamW(groups(), AdamWOptions{.eps = 0.0}); }, "AdamWOptions.eps");
  refused([&] { AdamW(groups(), AdamWOptions{.lr = NAN}); }, "AdamWOptions.lr");
  MuonOptions momentum;
  momentum.momentum = 1.5;
  refused([&] { Muon(groups(), momentum); }, "MuonOptions.momentum");
  MuonOptions steps;
  steps.newton_schulz.steps = 1'000'000'000;
  refused([&] { Muon(groups(), steps); }, "MuonOptions.newton_schulz.steps");
  MuonOptions ns_eps;
  ns_eps.newton_schulz.eps = 0.0f;
  refused([&] { Muon(groups(), ns_eps); }, "MuonOptions.newton_schulz.eps");
  std::vector<ParamGroup> bad_group = groups();
  bad_group[0].overrides.beta2 = 1.0;
  refused([&] { AdamW(bad_group, AdamWOptions{}); }, "overrides.beta2");

  AdamW ok(groups(), AdamWOptions{});
  refused([&] { ok.set_lr(NAN); }, "set_lr");
  GroupOverrides lr_negative;
  lr_negative.lr = -1.0;
  refused([&] { ok.set_param_overrides({{"w", lr_negative}}); }, "param 'w' overrides.lr");
  refused([&] { ok.set_step_options({.clip_grad = NAN}); }, "clip_grad");
  ok.step_with_ready_grads();  // the refusals left it usable
  for (float v : w) EXPECT_TRUE(std::isfinite(v));
}

}  // namespace
}  // namespace shardwise::optim
