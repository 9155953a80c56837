// The range checks of the optimizer hyperparameters, shared by every front end: the YAML config
// (validate(OptimizerConfig), so `shardwise train` and `config resolve`) and the Python package
// (shardwise.torch.make_optimizer and Optimizer.set_lr). Each front end names the fields its own
// way ("optimizer.adam_beta1" vs "betas[0]"); the limits and the wording, which follows
// torch.optim's ("Invalid learning rate: ..."), are the same.
#pragma once

#include <cstdint>
#include <string>

#include "shardwise/config/optimizer_config.hpp"

namespace shardwise {

// More Newton–Schulz iterations than any schedule uses (5 is the default; polar-express stops at
// 8): the limit only stops a typo from running one step for ever.
inline constexpr std::int64_t kMaxNewtonSchulzSteps = 100;

// The range-checked fields of the optimizer spec (OptimizerConfig), with its defaults.
struct OptimizerHyperparameters {
  double lr = kDefaultOptimizerConfig.lr;  // AdamW
  double muon_lr = kDefaultOptimizerConfig.muon_lr;
  double weight_decay = kDefaultOptimizerConfig.weight_decay;
  double beta1 = kDefaultOptimizerConfig.adam_beta1;
  double beta2 = kDefaultOptimizerConfig.adam_beta2;
  double eps = kDefaultOptimizerConfig.adam_eps;
  double momentum = kDefaultOptimizerConfig.muon_momentum;  // Muon
  std::int64_t ns_steps = kDefaultOptimizerConfig.muon_ns_steps;
  double extra_scale_factor = kDefaultOptimizerConfig.muon_extra_scale_factor;
  double clip_grad = kDefaultOptimizerConfig.clip_grad;  // 0 disables clipping
};

// The range-checked fields of `spec`.
OptimizerHyperparameters hyperparameters_of(const OptimizerConfig& spec);

// What each front end calls the fields, for the messages.
struct OptimizerFieldNames {
  std::string lr, muon_lr, weight_decay, beta1, beta2, eps, momentum, ns_steps, extra_scale_factor,
      clip_grad;
};

// Throws ConfigError naming the first field out of range: a learning rate, weight decay or clip
// that is negative, NaN or infinite; a beta or momentum outside [0, 1); eps or
// extra_scale_factor not finite and > 0; ns_steps outside [1, kMaxNewtonSchulzSteps].
void validate(const OptimizerHyperparameters& values, const OptimizerFieldNames& names);

// Decoupled decay multiplies the weights by 1 - lr * weight_decay each step: ConfigError naming
// the fields unless that is above 0 for both learning rates (the CLI's rule; torch allows it).
void validate_decoupled_decay(const OptimizerHyperparameters& values,
                              const OptimizerFieldNames& names);

// The learning-rate check alone (a new lr set during training).
void validate_learning_rate(double lr, const std::string& field);

}  // namespace shardwise
