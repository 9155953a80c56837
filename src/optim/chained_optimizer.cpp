#include "shardwise/optim/chained_optimizer.hpp"

#include <map>
#include <string>
#include <utility>

#include "shardwise/core/error.hpp"

namespace shardwise::optim {

ChainedOptimizer::ChainedOptimizer(std::vector<std::unique_ptr<Optimizer>> children)
    : Optimizer({}), children_(std::move(children)) {
  std::map<std::string, std::string_view> owner;
  for (const auto& child : children_) {
    SW_REQUIRE(child != nullptr, InvalidArgument, "ChainedOptimizer: a child optimizer is null");
    for (const ParamGroup& group : child->param_groups()) {
      for (const OptimParam& p : group.params) {
        const auto [it, inserted] = owner.emplace(p.name, child->kind());
        SW_REQUIRE(inserted, InvalidArgument, "ChainedOptimizer: param ", p.name,
                   " is owned by two child optimizers (", it->second, " and ", child->kind(), ")");
      }
    }
  }
}

bool ChainedOptimizer::prepare_grads() {
  bool ok = true;
  for (const auto& child : children_) ok = child->prepare_grads() && ok;
  return ok;
}

bool ChainedOptimizer::step_with_ready_grads() {
  bool stepped = true;
  for (const auto& child : children_) stepped = child->step_with_ready_grads() && stepped;
  return stepped;
}

double ChainedOptimizer::local_group_grad_sq_sum(std::string_view group) const {
  double total = 0.0;
  for (const auto& child : children_) total += child->local_group_grad_sq_sum(group);
  return total;
}

std::int64_t ChainedOptimizer::local_group_param_count(std::string_view group) const {
  std::int64_t count = 0;
  for (const auto& child : children_) count += child->local_group_param_count(group);
  return count;
}

void ChainedOptimizer::exclude_from_grad_stats(const std::set<std::string>& names) {
  Optimizer::exclude_from_grad_stats(names);
  for (const auto& child : children_) child->exclude_from_grad_stats(names);
}

double ChainedOptimizer::local_grad_sq_sum() const {
  double total = 0.0;
  for (const auto& child : children_) total += child->local_grad_sq_sum();
  return total;
}

std::int64_t ChainedOptimizer::local_grad_zero_count() const {
  std::int64_t total = 0;
  for (const auto& child : children_) total += child->local_grad_zero_count();
  return total;
}

void ChainedOptimizer::scale_grads(float coeff) {
  for (const auto& child : children_) child->scale_grads(coeff);
}

OptimizerState ChainedOptimizer::state_dict() const {
  OptimizerState merged;
  for (const auto& child : children_) merged.merge(child->state_dict());
  return merged;
}

OptimizerStateView ChainedOptimizer::state_view() const {
  OptimizerStateView merged;
  for (const auto& child : children_) merged.merge(child->state_view());
  return merged;
}

std::optional<StateLoadTargets> ChainedOptimizer::state_load_targets() {
  return merged_state_load_targets(children_);
}

void ChainedOptimizer::check_state_dict(const OptimizerState& state) const {
  check_composite_state(children_, state, "ChainedOptimizer");
}

void ChainedOptimizer::check_owned_state(const OptimizerState& state) const {
  for (const auto& child : children_) child->check_owned_state(state);
}

// Every child's part is checked before any child loads: a bad entry leaves all of them as they
// were.
void ChainedOptimizer::load_state_dict(const OptimizerState& state) {
  check_state_dict(state);
  load_composite_state(children_, state);
}

void ChainedOptimizer::take_state_dict(OptimizerState&& state) {
  check_state_dict(state);
  take_composite_state(children_, std::move(state));
}

void ChainedOptimizer::set_param_overrides(const ParamOverrides& overrides) {
  check_param_overrides(overrides);
  for (const auto& child : children_) child->set_param_overrides(overrides_for(*child, overrides));
}

std::set<std::string> ChainedOptimizer::param_names() const {
  std::set<std::string> names;
  for (const auto& child : children_) names.merge(child->param_names());
  return names;
}

void ChainedOptimizer::set_params_without_grad(const std::set<std::string>& names) {
  for (const auto& child : children_) child->set_params_without_grad(names);
}

void ChainedOptimizer::set_lr(double lr) {
  for (const auto& child : children_) child->set_lr(lr);
}

void ChainedOptimizer::reload_model_params() {
  for (const auto& child : children_) child->reload_model_params();
}

}  // namespace shardwise::optim
