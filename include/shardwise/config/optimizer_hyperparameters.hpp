// The range checks of the optimizer hyperparameters, shared by every front end: the YAML config
// (validate(OptimizerConfig), so `shardwise train` and `config resolve`) and the Python package
// (shardwise.torch.make_optimizer and Optimizer.set_lr). Each front end names the fields its own
// way ("optimizer.adam_beta1" vs "betas[0]"); the limits and the wording, which follows
// torch.optim's ("Invalid learning rate: ..."), are the same.
#pragma once

#include <cstdint>
#include <string>

namespace shardwise {

// More Newton–Schulz iterations than any schedule uses (5 is the default; polar-express stops at
// 8): the limit only stops a typo from running one step for ever.
inline constexpr std::int64_t kMaxNewtonSchulzSteps = 100;

struct OptimizerHyperparameters {
  double lr = 1e-3;  // AdamW
  double muon_lr = 0.002;
  double weight_decay = 0.01;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double momentum = 0.95;  // Muon
  std::int64_t ns_steps = 5;
  double extra_scale_factor = 1.0;
  double clip_grad = 1.0;  // 0 disables clipping
};

// What each front end calls the fields, for the messages.
struct OptimizerFieldNames {
  std::string lr, muon_lr, weight_decay, beta1, beta2, eps, momentum, ns_steps, extra_scale_factor,
      clip_grad;
};

// Throws ConfigError naming the first field out of range: a learning rate, weight decay or clip
// that is negative, NaN or infinite; a beta or momentum outside [0, 1); eps or
// extra_scale_factor not finite and > 0; ns_steps outside [1, kMaxNewtonSchulzSteps].
void validate(const OptimizerHyperparameters& values, const OptimizerFieldNames& names);

// The learning-rate check alone (a new lr set during training).
void validate_learning_rate(double lr, const std::string& field);

}  // namespace shardwise
