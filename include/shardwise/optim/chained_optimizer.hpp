// Several optimizers stepping as one (Muon for the 2-D weights, AdamW for everything else).
// step() runs the pipeline once over all children: prepare grads -> one global grad norm over
// every child's grads -> clip all of them with the same coefficient -> optional zero count ->
// step_with_ready_grads() on each child. Children's own step options and world reductions are
// not used; the chain's are.
#pragma once

#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "shardwise/optim/optimizer.hpp"

namespace shardwise::optim {

class ChainedOptimizer : public Optimizer {
 public:
  // Param names must be unique across all children (they key the merged state dict).
  explicit ChainedOptimizer(std::vector<std::unique_ptr<Optimizer>> children);

  std::string_view kind() const override { return "chained"; }
  bool prepare_grads() override;
  bool step_with_ready_grads() override;

  double local_grad_sq_sum() const override;
  std::int64_t local_grad_zero_count() const override;
  double local_group_grad_sq_sum(std::string_view group) const override;
  std::int64_t local_group_param_count(std::string_view group) const override;
  void scale_grads(float coeff) override;
  void exclude_from_grad_stats(const std::set<std::string>& names) override;

  // Union of the children's state dicts; loading routes each entry to the child owning it.
  OptimizerState state_dict() const override;
  OptimizerStateView state_view() const override;
  void load_state_dict(const OptimizerState& state) override;
  void check_state_dict(const OptimizerState& state) const override;
  void check_owned_state(const OptimizerState& state) const override;
  void take_state_dict(OptimizerState&& state) override;
  std::optional<StateLoadTargets> state_load_targets() override;
  void set_lr(double lr) override;
  void reload_model_params() override;
  void set_param_overrides(const ParamOverrides& overrides) override;
  std::set<std::string> param_names() const override;
  void set_params_without_grad(const std::set<std::string>& names) override;

  const std::vector<std::unique_ptr<Optimizer>>& children() const { return children_; }

 private:
  std::vector<std::unique_ptr<Optimizer>> children_;
};

}  // namespace shardwise::optim
