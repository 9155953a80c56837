// AdamW (Loshchilov & Hutter) with fp32 state, bias correction and decoupled weight decay, as
// torch.optim.AdamW computes it:
//   p <- p * (1 - lr*wd)
//   m <- b1*m + (1-b1)*g,  v <- b2*v + (1-b2)*g^2
//   p <- p - lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps)
// lr, weight decay, betas and eps can be overridden per param group. Works on any shape
// (a shard of a flattened buffer is fine): it only looks at numel.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "shardwise/config/optimizer_config.hpp"
#include "shardwise/optim/optimizer.hpp"

namespace shardwise::optim {

// Defaults: the optimizer spec's (kDefaultOptimizerConfig), never a second set.
struct AdamWOptions {
  double lr = kDefaultOptimizerConfig.lr;
  double weight_decay = kDefaultOptimizerConfig.weight_decay;
  double beta1 = kDefaultOptimizerConfig.adam_beta1;
  double beta2 = kDefaultOptimizerConfig.adam_beta2;
  double eps = kDefaultOptimizerConfig.adam_eps;
};

// Scalars of one AdamW update, folded once per param so the element loop is pure arithmetic.
struct AdamWStepScalars {
  float decay;  // 1 - lr*wd
  float beta1, one_minus_beta1;
  float beta2, one_minus_beta2;
  float step_size;       // lr / (1 - beta1^t)
  float inv_sqrt_bias2;  // 1 / sqrt(1 - beta2^t)
  float eps;

  static AdamWStepScalars make(double lr, double weight_decay, double beta1, double beta2,
                               double eps, std::int64_t step);
};

// The element loop: updates param, exp_avg and exp_avg_sq in place from grad.
void adamw_update(const AdamWStepScalars& s, std::span<float> param, std::span<const float> grad,
                  std::span<float> exp_avg, std::span<float> exp_avg_sq);

class AdamW : public Optimizer {
 public:
  // `math` says where the params, grads and moments live (the host by default).
  AdamW(std::vector<ParamGroup> groups, AdamWOptions defaults,
        ShardMathPtr math = host_shard_math());

  std::string_view kind() const override { return "adamw"; }
  bool step_with_ready_grads() override;
  // Updates the params of param_groups()[index] only (a distributed wrapper steps one group at a
  // time so it can ship each group as soon as it is updated). Throws InvalidArgument when out of
  // range.
  bool step_group(std::size_t index);
  OptimizerState state_dict() const override;
  OptimizerStateView state_view() const override;
  void load_state_dict(const OptimizerState& state) override;
  // Complete and well-sized for every param, or throws naming the param and field.
  void check_owned_state(const OptimizerState& state) const override;
  void take_state_dict(OptimizerState&& state) override;
  std::optional<StateLoadTargets> state_load_targets() override;

  const AdamWOptions& defaults() const { return defaults_; }

 private:
  struct State {
    FloatArray exp_avg;  // in the memory of math()
    FloatArray exp_avg_sq;
    std::int64_t step = 0;
  };
  // Zero state for params seen for the first time (e.g. added to a group after construction).
  State& state_for(const OptimParam& p);

  AdamWOptions defaults_;
  // Keyed by param name, so a wrapper may narrow or regroup param_groups() between steps.
  std::map<std::string, State> state_;
};

}  // namespace shardwise::optim
