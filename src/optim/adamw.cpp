#include "shardwise/optim/adamw.hpp"

#include <cmath>
#include <cstddef>
#include <utility>

#include "adamw_kernels.hpp"
#include "shardwise/config/optimizer_hyperparameters.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/core/tensor_view.hpp"

namespace shardwise::optim {

AdamWStepScalars AdamWStepScalars::make(double lr, double weight_decay, double beta1, double beta2,
                                        double eps, std::int64_t step) {
  const double t = static_cast<double>(step);
  const double bias1 = 1.0 - std::pow(beta1, t);
  const double bias2 = 1.0 - std::pow(beta2, t);
  AdamWStepScalars s{};
  s.decay = static_cast<float>(1.0 - lr * weight_decay);
  s.beta1 = static_cast<float>(beta1);
  s.one_minus_beta1 = static_cast<float>(1.0 - beta1);
  s.beta2 = static_cast<float>(beta2);
  s.one_minus_beta2 = static_cast<float>(1.0 - beta2);
  s.step_size = static_cast<float>(lr / bias1);
  s.inv_sqrt_bias2 = static_cast<float>(1.0 / std::sqrt(bias2));
  s.eps = static_cast<float>(eps);
  return s;
}

void adamw_update(const AdamWStepScalars& s, std::span<float> param, std::span<const float> grad,
                  std::span<float> exp_avg, std::span<float> exp_avg_sq) {
  SW_CHECK(grad.size() == param.size() && exp_avg.size() == param.size() &&
               exp_avg_sq.size() == param.size(),
           "adamw_update: span sizes differ");
  // One streaming pass over the four arrays at the widest vectors the CPU has.
  dispatch(adamw_kernels::kUpdate)(s, param.data(), grad.data(), exp_avg.data(), exp_avg_sq.data(),
                                   static_cast<std::int64_t>(param.size()));
}

AdamW::AdamW(std::vector<ParamGroup> groups, AdamWOptions defaults, ShardMathPtr math)
    : Optimizer(std::move(groups), std::move(math)), defaults_(defaults) {
  OptimizerHyperparameters values;
  values.lr = defaults.lr;
  values.weight_decay = defaults.weight_decay;
  values.beta1 = defaults.beta1;
  values.beta2 = defaults.beta2;
  values.eps = defaults.eps;
  validate(values, optimizer_field_names("AdamWOptions"));
  validate_params("AdamW");
  for (const ParamGroup& group : groups_) {
    for (const OptimParam& p : group.params) state_for(p);
  }
}

AdamW::State& AdamW::state_for(const OptimParam& p) {
  const std::int64_t n = p.numel();
  auto [it, inserted] = state_.try_emplace(p.name);
  if (inserted) {
    it->second.exp_avg = math_->zeros(n);
    it->second.exp_avg_sq = math_->zeros(n);
  }
  SW_REQUIRE(it->second.exp_avg.size() == n, ShapeError, "AdamW: param ", p.name, " has ", n,
             " elements but its state has ", it->second.exp_avg.size());
  return it->second;
}

bool AdamW::step_with_ready_grads() {
  for (std::size_t g = 0; g < groups_.size(); ++g) step_group(g);
  return true;
}

bool AdamW::step_group(std::size_t index) {
  SW_REQUIRE(index < groups_.size(), InvalidArgument, "AdamW: no param group ", index,
             " (there are ", groups_.size(), ")");
  const ParamGroup& group = groups_[index];
  const GroupOverrides& o = group.overrides;
  const double lr = o.lr.value_or(defaults_.lr);
  const double wd = o.weight_decay.value_or(defaults_.weight_decay);
  const double beta1 = o.beta1.value_or(defaults_.beta1);
  const double beta2 = o.beta2.value_or(defaults_.beta2);
  const double eps = o.eps.value_or(defaults_.eps);
  for (const OptimParam& p : group.params) {
    if (p.grad == nullptr || has_no_grad(p.name)) continue;
    State& st = state_for(p);
    st.step += 1;
    const GroupOverrides* found = param_overrides(p.name);
    const GroupOverrides& po = found != nullptr ? *found : kNoParamOverrides;
    const AdamWStepScalars scalars = AdamWStepScalars::make(
        override_or(po.lr, lr), override_or(po.weight_decay, wd), override_or(po.beta1, beta1),
        override_or(po.beta2, beta2), override_or(po.eps, eps), st.step);
    math_->adamw_update(scalars, p.main_param, p.grad, st.exp_avg.data(), st.exp_avg_sq.data(),
                        p.numel());
  }
  return true;
}

OptimizerState AdamW::state_dict() const {
  OptimizerState out;
  for (const ParamGroup& group : groups_) {
    for (const OptimParam& p : group.params) {
      ParamState& ps = out[p.name];
      const auto it = state_.find(p.name);
      if (it == state_.end()) {  // never stepped: the zero state
        const auto n = static_cast<std::size_t>(p.numel());
        ps["exp_avg"].assign(n, 0.0f);
        ps["exp_avg_sq"].assign(n, 0.0f);
        ps["step"] = {0.0f};
        continue;
      }
      ps["exp_avg"] = math_->to_host(it->second.exp_avg.data(), it->second.exp_avg.size());
      ps["exp_avg_sq"] = math_->to_host(it->second.exp_avg_sq.data(), it->second.exp_avg_sq.size());
      ps["step"] = {step_to_float(it->second.step)};
    }
  }
  return out;
}

OptimizerStateView AdamW::state_view() const {
  OptimizerStateView view;
  for (const ParamGroup& group : groups_) {
    for (const OptimParam& p : group.params) {
      OptimizerStateView::Fields& fields = view.fields_of(p.name);
      const auto it = state_.find(p.name);
      if (it == state_.end()) {  // never stepped: the zero state, as state_dict() gives it
        const auto n = static_cast<std::size_t>(p.numel());
        fields["exp_avg"] = view.hold(std::vector<float>(n, 0.0f));
        fields["exp_avg_sq"] = view.hold(std::vector<float>(n, 0.0f));
        fields["step"] = view.hold({0.0f});
        continue;
      }
      fields["exp_avg"] = math_->view_values(it->second.exp_avg, view);
      fields["exp_avg_sq"] = math_->view_values(it->second.exp_avg_sq, view);
      fields["step"] = view.hold({step_to_float(it->second.step)});
    }
  }
  return view;
}

void AdamW::take_state_dict(OptimizerState&& state) {
  check_state_dict(state);
  for (const ParamGroup& group : groups_) {
    for (const OptimParam& p : group.params) {
      ParamState& ps = state.at(p.name);
      State& st = state_[p.name];
      st.exp_avg = math_->adopt(std::move(ps.at("exp_avg")));
      st.exp_avg_sq = math_->adopt(std::move(ps.at("exp_avg_sq")));
      st.step = step_from_float(ps.at("step")[0], p.name, "AdamW");
    }
  }
}

std::optional<StateLoadTargets> AdamW::state_load_targets() {
  if (math_->device() != TensorView::kHostMemory) return std::nullopt;
  StateLoadTargets out;
  for (const ParamGroup& group : groups_) {
    for (const OptimParam& p : group.params) {
      State& st = state_for(p);
      StateLoadTarget& target = out[p.name];
      target.arrays["exp_avg"] = {st.exp_avg.data(), static_cast<std::size_t>(st.exp_avg.size())};
      target.arrays["exp_avg_sq"] = {st.exp_avg_sq.data(),
                                     static_cast<std::size_t>(st.exp_avg_sq.size())};
      target.step = &st.step;
    }
  }
  return out;
}

void AdamW::check_owned_state(const OptimizerState& state) const {
  // Validate everything before touching any state, so a bad dict leaves the optimizer as it was.
  for (const ParamGroup& group : groups_) {
    for (const OptimParam& p : group.params) {
      const ParamState& ps = param_entry(state, p.name, "AdamW");
      state_field(ps, p.name, "exp_avg", p.numel(), "AdamW");
      state_field(ps, p.name, "exp_avg_sq", p.numel(), "AdamW", StateValues::kFiniteNonNegative);
      step_from_float(state_field(ps, p.name, "step", 1, "AdamW")[0], p.name, "AdamW");
    }
  }
}

void AdamW::load_state_dict(const OptimizerState& state) {
  check_state_dict(state);
  for (const ParamGroup& group : groups_) {
    for (const OptimParam& p : group.params) {
      const ParamState& ps = state.at(p.name);
      State& st = state_[p.name];
      st.exp_avg = math_->adopt(std::vector<float>(ps.at("exp_avg")));
      st.exp_avg_sq = math_->adopt(std::vector<float>(ps.at("exp_avg_sq")));
      st.step = step_from_float(ps.at("step")[0], p.name, "AdamW");
    }
  }
}

}  // namespace shardwise::optim
