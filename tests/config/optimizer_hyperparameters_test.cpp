// The optimizer hyperparameter checks shared by the YAML config and the Python front end: every
// out-of-range value (NaN and infinity included) is refused with a message naming the field in
// the caller's words, and the config path goes through the same checks.
#include "shardwise/config/optimizer_hyperparameters.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "shardwise/config/training_config.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise {
namespace {

const OptimizerFieldNames kPythonNames{
    "lr",  "muon_lr",  "weight_decay", "betas[0]",           "betas[1]",
    "eps", "momentum", "ns_steps",     "extra_scale_factor", "clip_grad"};

std::string hyperparameter_error(const OptimizerHyperparameters& values) {
  try {
    validate(values, kPythonNames);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

struct BadHyperparameter {
  std::function<void(OptimizerHyperparameters&)> set;
  std::string message;
};

TEST(OptimizerHyperparameters, DefaultsAndEdgesAreAccepted) {
  EXPECT_EQ(hyperparameter_error({}), "");
  OptimizerHyperparameters edges;
  edges.lr = 0;
  edges.muon_lr = 0;
  edges.weight_decay = 0;
  edges.beta1 = 0;
  edges.beta2 = 0.999999;
  edges.momentum = 0;
  edges.ns_steps = kMaxNewtonSchulzSteps;
  edges.clip_grad = 0;
  EXPECT_EQ(hyperparameter_error(edges), "");
}

TEST(OptimizerHyperparameters, OutOfRangeValuesNameTheField) {
  const double nan = std::nan("");
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<BadHyperparameter> cases = {
      {[&](auto& v) { v.lr = nan; }, "Invalid learning rate: lr must be >= 0 (got nan)"},
      {[&](auto& v) { v.lr = -1e-3; }, "Invalid learning rate: lr must be >= 0 (got -0.001)"},
      {[&](auto& v) { v.lr = inf; }, "Invalid learning rate: lr must be finite (got inf)"},
      {[&](auto& v) { v.muon_lr = -inf; }, "muon_lr must be finite"},
      {[&](auto& v) { v.weight_decay = -0.1; },
       "Invalid weight_decay value: weight_decay must be >= 0"},
      {[&](auto& v) { v.weight_decay = nan; }, "weight_decay must be >= 0 (got nan)"},
      {[&](auto& v) { v.beta1 = 1; },
       "Invalid beta parameter at index 0: betas[0] must be in [0, 1) (got 1)"},
      {[&](auto& v) { v.beta2 = 1; },
       "Invalid beta parameter at index 1: betas[1] must be in [0, 1)"},
      {[&](auto& v) { v.beta2 = -0.5; }, "betas[1] must be in [0, 1) (got -0.5)"},
      {[&](auto& v) { v.beta1 = nan; }, "betas[0] must be in [0, 1) (got nan)"},
      {[&](auto& v) { v.eps = 0; }, "Invalid epsilon value: eps must be > 0 (got 0)"},
      {[&](auto& v) { v.eps = -1e-8; }, "eps must be > 0"},
      {[&](auto& v) { v.eps = inf; }, "eps must be finite"},
      {[&](auto& v) { v.momentum = 2; },
       "Invalid momentum value: momentum must be in [0, 1) (got 2)"},
      {[&](auto& v) { v.momentum = 1; }, "momentum must be in [0, 1)"},
      {[&](auto& v) { v.ns_steps = 0; },
       "Invalid Newton-Schulz steps: ns_steps must be in [1, 100] (got 0)"},
      {[&](auto& v) { v.ns_steps = 2147483647; }, "ns_steps must be in [1, 100] (got 2147483647)"},
      {[&](auto& v) { v.extra_scale_factor = 0; },
       "Invalid scale factor: extra_scale_factor must be > 0"},
      {[&](auto& v) { v.extra_scale_factor = nan; }, "extra_scale_factor must be > 0 (got nan)"},
      {[&](auto& v) { v.clip_grad = nan; },
       "Invalid clip_grad value: clip_grad must be >= 0 (got nan)"},
      {[&](auto& v) { v.clip_grad = -1; }, "clip_grad must be >= 0 (got -1)"},
  };
  for (const auto& c : cases) {
    OptimizerHyperparameters v;
    c.set(v);
    const std::string message = hyperparameter_error(v);
    EXPECT_NE(message.find(c.message), std::string::npos)
        << "expected '" << c.message << "' in '" << message << "'";
  }
}

TEST(OptimizerHyperparameters, LearningRateAloneForSetLr) {
  EXPECT_NO_THROW(validate_learning_rate(0.5, "lr"));
  EXPECT_THROW(validate_learning_rate(std::nan(""), "lr"), ConfigError);
  EXPECT_THROW(validate_learning_rate(-1, "lr"), ConfigError);
}

TEST(OptimizerHyperparameters, TheConfigUsesTheSameChecksUnderItsFieldNames) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      // The YAML reader refuses NaN and infinity before the range checks see them.
      {"optimizer.lr=nan", "optimizer.lr: expected a finite number, got 'nan'"},
      {"optimizer.lr=.inf", "optimizer.lr: expected a finite number"},
      {"optimizer.lr=-0.5", "Invalid learning rate: optimizer.lr must be >= 0 (got -0.5)"},
      {"optimizer.adam_beta1=1", "optimizer.adam_beta1 must be in [0, 1) (got 1)"},
      {"optimizer.adam_eps=0", "Invalid epsilon value: optimizer.adam_eps must be > 0"},
      {"optimizer.muon_momentum=2", "optimizer.muon_momentum must be in [0, 1) (got 2)"},
      {"optimizer.muon_ns_steps=2147483647", "optimizer.muon_ns_steps must be in [1, 100]"},
      {"optimizer.muon_ns_steps=0", "optimizer.muon_ns_steps must be in [1, 100] (got 0)"},
      {"optimizer.clip_grad=-2", "optimizer.clip_grad must be >= 0 (got -2)"},
      {"optimizer.muon_extra_scale_factor=0", "optimizer.muon_extra_scale_factor must be > 0"},
      {"optimizer.adam_beta2=1.5", "Invalid beta parameter at index 1: optimizer.adam_beta2"},
      {"optimizer.weight_decay=-1", "optimizer.weight_decay must be >= 0 (got -1)"},
  };
  for (const auto& [override_, message] : cases) {
    std::string error;
    try {
      parse_training_config("", {override_}, "test.yaml");
    } catch (const ConfigError& e) {
      error = e.what();
    }
    EXPECT_NE(error.find(message), std::string::npos)
        << override_ << ": expected '" << message << "' in '" << error << "'";
  }
}

}  // namespace
}  // namespace shardwise
