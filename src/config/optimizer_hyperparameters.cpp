#include "shardwise/config/optimizer_hyperparameters.hpp"

#include <cmath>

#include "shardwise/core/error.hpp"

namespace shardwise {
namespace {

// The comparisons are written so that NaN fails them; infinity gets its own message.
void require_finite_value(double value, const char* what, const std::string& field) {
  SW_REQUIRE(std::isnan(value) || std::isfinite(value), ConfigError, what, ": ", field,
             " must be finite (got ", value, ")");
}

void require_non_negative_value(double value, const char* what, const std::string& field) {
  require_finite_value(value, what, field);
  SW_REQUIRE(value >= 0.0, ConfigError, what, ": ", field, " must be >= 0 (got ", value, ")");
}

void require_positive_value(double value, const char* what, const std::string& field) {
  require_finite_value(value, what, field);
  SW_REQUIRE(value > 0.0, ConfigError, what, ": ", field, " must be > 0 (got ", value, ")");
}

void require_fraction_value(double value, const char* what, const std::string& field) {
  SW_REQUIRE(value >= 0.0 && value < 1.0, ConfigError, what, ": ", field,
             " must be in [0, 1) (got ", value, ")");
}

}  // namespace

void validate_learning_rate(double lr, const std::string& field) {
  require_non_negative_value(lr, "Invalid learning rate", field);
}

void validate(const OptimizerHyperparameters& v, const OptimizerFieldNames& names) {
  validate_learning_rate(v.lr, names.lr);
  validate_learning_rate(v.muon_lr, names.muon_lr);
  require_non_negative_value(v.weight_decay, "Invalid weight_decay value", names.weight_decay);
  require_fraction_value(v.beta1, "Invalid beta parameter at index 0", names.beta1);
  require_fraction_value(v.beta2, "Invalid beta parameter at index 1", names.beta2);
  require_positive_value(v.eps, "Invalid epsilon value", names.eps);
  require_fraction_value(v.momentum, "Invalid momentum value", names.momentum);
  SW_REQUIRE(v.ns_steps >= 1 && v.ns_steps <= kMaxNewtonSchulzSteps, ConfigError,
             "Invalid Newton-Schulz steps: ", names.ns_steps, " must be in [1, ",
             kMaxNewtonSchulzSteps, "] (got ", v.ns_steps, ")");
  require_positive_value(v.extra_scale_factor, "Invalid scale factor", names.extra_scale_factor);
  require_non_negative_value(v.clip_grad, "Invalid clip_grad value", names.clip_grad);
}

void validate_decoupled_decay(const OptimizerHyperparameters& v, const OptimizerFieldNames& names) {
  // At 1 the weights are zeroed each step, above it their sign flips (weight_decay 1e10 trained to
  // NaN and saved 1e14 weights).
  for (const auto& [lr, name] :
       {std::pair{v.lr, &names.lr}, std::pair{v.muon_lr, &names.muon_lr}}) {
    SW_REQUIRE(lr * v.weight_decay < 1.0, ConfigError, *name, " (", lr, ") x ", names.weight_decay,
               " (", v.weight_decay,
               ") must be < 1: each step multiplies the weights by 1 - lr x weight_decay");
  }
}

}  // namespace shardwise
