#include "shardwise/config/optimizer_config.hpp"

#include <utility>

#include "shardwise/config/optimizer_hyperparameters.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise {
namespace {

const OptimizerFieldNames& config_field_names() {
  static const OptimizerFieldNames names{"optimizer.lr",
                                         "optimizer.muon_lr",
                                         "optimizer.weight_decay",
                                         "optimizer.adam_beta1",
                                         "optimizer.adam_beta2",
                                         "optimizer.adam_eps",
                                         "optimizer.muon_momentum",
                                         "optimizer.muon_ns_steps",
                                         "optimizer.muon_extra_scale_factor",
                                         "optimizer.clip_grad"};
  return names;
}

}  // namespace

OptimizerHyperparameters hyperparameters_of(const OptimizerConfig& spec) {
  OptimizerHyperparameters values;
  values.lr = spec.lr;
  values.muon_lr = spec.muon_lr;
  values.weight_decay = spec.weight_decay;
  values.beta1 = spec.adam_beta1;
  values.beta2 = spec.adam_beta2;
  values.eps = spec.adam_eps;
  values.momentum = spec.muon_momentum;
  values.ns_steps = spec.muon_ns_steps;
  values.extra_scale_factor = spec.muon_extra_scale_factor;
  values.clip_grad = spec.clip_grad;
  return values;
}

void validate(const OptimizerConfig& config) {
  validate(hyperparameters_of(config), config_field_names());
  validate_learning_rate(config.min_lr, "optimizer.min_lr");
  SW_REQUIRE(config.min_lr <= config.lr, ConfigError, "optimizer.min_lr (", config.min_lr,
             ") must be <= optimizer.lr (", config.lr, ")");
  validate_decoupled_decay(hyperparameters_of(config), config_field_names());
  if (config.overlap_param_gather_with_optimizer_step) {
    SW_REQUIRE(config.use_distributed_optimizer(), ConfigError,
               "optimizer.overlap_param_gather_with_optimizer_step needs a distributed optimizer "
               "(kind layer-wise or distributed), not '",
               to_string(config.kind), "'");
  }
}

}  // namespace shardwise
