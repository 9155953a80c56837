#include "shardwise/optim/optimizer.hpp"

#include <cmath>
#include <set>
#include <span>
#include <utility>

#include "shardwise/config/optimizer_hyperparameters.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise::optim {

namespace {

std::set<std::string> owned_param_names(const Optimizer& optimizer) {
  std::set<std::string> names;
  for (const ParamGroup& group : optimizer.param_groups()) {
    for (const OptimParam& p : group.params) names.insert(p.name);
  }
  return names;
}

}  // namespace

std::int64_t OptimParam::numel() const {
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  return n;
}

OptimizerFieldNames optimizer_field_names(std::string_view where) {
  const auto field = [&](const char* name) { return str_cat(where, ".", name); };
  return {field("lr"),
          field("lr"),
          field("weight_decay"),
          field("beta1"),
          field("beta2"),
          field("eps"),
          field("momentum"),
          field("newton_schulz.steps"),
          field("extra_scale_factor"),
          field("clip_grad")};
}

void validate_overrides(const GroupOverrides& overrides, std::string_view where) {
  OptimizerHyperparameters values;  // the defaults, which pass
  values.lr = overrides.lr.value_or(values.lr);
  values.weight_decay = overrides.weight_decay.value_or(values.weight_decay);
  values.beta1 = overrides.beta1.value_or(values.beta1);
  values.beta2 = overrides.beta2.value_or(values.beta2);
  values.eps = overrides.eps.value_or(values.eps);
  values.momentum = overrides.momentum.value_or(values.momentum);
  validate(values, optimizer_field_names(where));
}

Optimizer::Optimizer(std::vector<ParamGroup> groups, ShardMathPtr math)
    : groups_(std::move(groups)),
      math_(std::move(math)),
      world_reduce_([](double local) { return local; }) {
  SW_REQUIRE(math_ != nullptr, InvalidArgument, "optimizer built without its shard math");
  for (const ParamGroup& group : groups_) {
    validate_overrides(group.overrides, str_cat("param group '", group.name, "' overrides"));
  }
}

std::optional<StateLoadTargets> merged_state_load_targets(
    const std::vector<std::unique_ptr<Optimizer>>& children) {
  StateLoadTargets merged;
  for (const auto& child : children) {
    std::optional<StateLoadTargets> part = child->state_load_targets();
    if (!part) return std::nullopt;
    merged.merge(std::move(*part));
  }
  return merged;
}

OptimizerStateView Optimizer::state_view() const {
  OptimizerStateView view;
  for (auto& [param, fields] : state_dict()) {
    OptimizerStateView::Fields& out = view.fields_of(param);
    for (auto& [field, values] : fields) out[field] = view.hold(std::move(values));
  }
  return view;
}

void Optimizer::validate_params(std::string_view what) const {
  std::set<std::string> seen;
  for (const ParamGroup& group : groups_) {
    for (const OptimParam& p : group.params) {
      SW_REQUIRE(!p.name.empty(), InvalidArgument, what, ": a param in group '", group.name,
                 "' has an empty name");
      SW_REQUIRE(seen.insert(p.name).second, InvalidArgument, what, ": param ", p.name,
                 " is listed twice");
      for (std::int64_t d : p.shape) {
        SW_REQUIRE(d >= 0, ShapeError, what, ": param ", p.name, " has a negative dimension");
      }
      SW_REQUIRE(p.main_param != nullptr || p.numel() == 0, InvalidArgument, what, ": param ",
                 p.name, " has no main param view");
    }
  }
}

double Optimizer::local_grad_sq_sum() const {
  double total = 0.0;
  for (const ParamGroup& group : groups_) {
    for (const OptimParam& p : group.params) {
      if (!counts_in_grad_stats(p)) continue;
      total += math_->sum_of_squares(p.grad, p.numel());
    }
  }
  return total;
}

double Optimizer::local_group_grad_sq_sum(std::string_view name) const {
  double total = 0.0;
  for (const ParamGroup& group : groups_) {
    if (group.name != name) continue;
    for (const OptimParam& p : group.params) {
      if (!counts_in_grad_stats(p)) continue;
      total += math_->sum_of_squares(p.grad, p.numel());
    }
  }
  return total;
}

std::int64_t Optimizer::local_grad_zero_count() const {
  std::int64_t total = 0;
  for (const ParamGroup& group : groups_) {
    for (const OptimParam& p : group.params) {
      if (!counts_in_grad_stats(p)) continue;
      total += math_->count_zeros(p.grad, p.numel());
    }
  }
  return total;
}

void Optimizer::scale_grads(float coeff) {
  for (ParamGroup& group : groups_) {
    for (OptimParam& p : group.params) {
      if (p.grad == nullptr) continue;
      math_->scale(p.grad, p.numel(), coeff);
    }
  }
}

std::int64_t Optimizer::local_group_param_count(std::string_view name) const {
  std::int64_t count = 0;
  for (const ParamGroup& group : groups_) {
    if (group.name != name) continue;
    for (const OptimParam& p : group.params) count += counts_in_grad_statistics(p) ? 1 : 0;
  }
  return count;
}

double Optimizer::get_grad_norm() const {
  if (global_grad_sq_sum_) return std::sqrt(global_grad_sq_sum_());
  return std::sqrt(world_reduce_(local_grad_sq_sum()));
}

bool Optimizer::has_grad_norm_group(std::string_view group) const {
  return world_reduce_(static_cast<double>(local_group_param_count(group))) > 0.5;
}

double Optimizer::grad_norm_for_group(std::string_view group) const {
  return std::sqrt(world_reduce_(local_group_grad_sq_sum(group)));
}

std::int64_t Optimizer::count_zeros() const {
  // Counts are exact in a double up to 2^53 elements.
  return static_cast<std::int64_t>(
      std::llround(world_reduce_(static_cast<double>(local_grad_zero_count()))));
}

void Optimizer::set_step_options(const StepOptions& options) {
  SW_REQUIRE(!std::isnan(options.clip_grad), InvalidArgument,
             "StepOptions.clip_grad is NaN (<= 0 disables clipping)");
  step_options_ = options;
}

void Optimizer::set_lr(double lr) {
  validate_learning_rate(lr, "Optimizer::set_lr(lr)");
  for (ParamGroup& group : groups_) group.overrides.lr = lr;
}

void Optimizer::set_param_overrides(const ParamOverrides& overrides) {
  check_param_overrides(overrides);
  param_overrides_ = overrides;
}

std::set<std::string> Optimizer::param_names() const { return owned_param_names(*this); }

void Optimizer::check_param_overrides(const ParamOverrides& overrides) const {
  if (overrides.empty()) return;
  const std::set<std::string> known = param_names();
  for (const auto& [name, values] : overrides) {
    SW_REQUIRE(known.contains(name), InvalidArgument, "per-param overrides name '", name,
               "', which is not a param of this ", kind(), " optimizer");
    validate_overrides(values, str_cat("param '", name, "' overrides"));
  }
}

ParamOverrides Optimizer::overrides_for(const Optimizer& child, const ParamOverrides& overrides) {
  if (overrides.empty()) return {};
  const std::set<std::string> names = child.param_names();
  ParamOverrides out;
  for (const auto& [name, values] : overrides) {
    if (names.contains(name)) out.emplace(name, values);
  }
  return out;
}

void Optimizer::set_params_without_grad(const std::set<std::string>& names) {
  params_without_grad_ = names;
}

const GroupOverrides* Optimizer::param_overrides(const std::string& name) const {
  if (param_overrides_.empty()) return nullptr;  // the default path: no lookup
  const auto it = param_overrides_.find(name);
  return it == param_overrides_.end() ? nullptr : &it->second;
}

bool Optimizer::counts_in_grad_stats(const OptimParam& p) const {
  return p.grad != nullptr && !excluded_from_stats_.contains(p.name) &&
         counts_in_grad_statistics(p);
}

void Optimizer::exclude_from_grad_stats(const std::set<std::string>& names) {
  excluded_from_stats_ = names;
}

void Optimizer::set_world_reduce(WorldReduce reduce) {
  SW_REQUIRE(static_cast<bool>(reduce), InvalidArgument, "world reduce function is empty");
  world_reduce_ = std::move(reduce);
}

StepResult Optimizer::step() {
  StepResult result;
  if (!prepare_grads()) return result;
  result.grad_norm = get_grad_norm();
  if (!std::isfinite(result.grad_norm)) return result;
  if (step_options_.clip_grad > 0.0) {
    result.clip_coeff = clip_coefficient(result.grad_norm, step_options_.clip_grad);
    if (result.clip_coeff < 1.0) scale_grads(static_cast<float>(result.clip_coeff));
  }
  if (step_options_.count_zeros) result.num_zeros = count_zeros();
  result.stepped = step_with_ready_grads();
  return result;
}

double clip_coefficient(double total_norm, double max_norm) {
  const double coeff = max_norm / (total_norm + 1e-6);
  return coeff < 1.0 ? coeff : 1.0;
}

std::vector<ParamGroup> single_group(std::vector<OptimParam> params) {
  std::vector<ParamGroup> groups(1);
  groups[0].name = "default";
  groups[0].params = std::move(params);
  return groups;
}

const ParamState& param_entry(const OptimizerState& state, const std::string& param,
                              std::string_view what) {
  const auto it = state.find(param);
  SW_REQUIRE(it != state.end(), FormatError, what, " state dict has no entry for param ", param);
  return it->second;
}

const std::vector<float>& state_field(const ParamState& entry, const std::string& param,
                                      std::string_view field, std::int64_t expected_size,
                                      std::string_view what, StateValues values) {
  const auto it = entry.find(std::string(field));
  SW_REQUIRE(it != entry.end(), FormatError, what, " state dict entry of param ", param,
             " has no field '", field, "'");
  SW_REQUIRE(static_cast<std::int64_t>(it->second.size()) == expected_size, ShapeError, what,
             " state dict field '", field, "' of param ", param, " has ", it->second.size(),
             " values, expected ", expected_size);
  const bool non_negative = values == StateValues::kFiniteNonNegative;
  const std::vector<float>& v = it->second;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (std::isfinite(v[i]) && !(non_negative && v[i] < 0)) continue;
    throw FormatError(str_cat(what, " state dict field '", field, "' of param ", param, " holds ",
                              v[i], " at index ", i,
                              std::isfinite(v[i]) ? " (it cannot be negative)" : ""));
  }
  return v;
}

void Optimizer::check_state_dict(const OptimizerState& state) const {
  check_no_unknown_params(*this, state, kind());
  check_owned_state(state);
}

void check_composite_state(const std::vector<std::unique_ptr<Optimizer>>& children,
                           const OptimizerState& state, std::string_view what) {
  std::set<std::string> owned;
  for (const auto& child : children) owned.merge(owned_param_names(*child));
  for (const auto& [name, entry] : state) {
    SW_REQUIRE(owned.contains(name), FormatError, what, " state dict has an entry for param ", name,
               ", which no child optimizer owns on this rank");
  }
  for (const auto& child : children) child->check_owned_state(state);
}

void load_composite_state(const std::vector<std::unique_ptr<Optimizer>>& children,
                          const OptimizerState& state) {
  for (const auto& child : children) {
    OptimizerState part;
    for (const std::string& name : owned_param_names(*child)) {
      if (const auto it = state.find(name); it != state.end()) part.emplace(name, it->second);
    }
    child->take_state_dict(std::move(part));
  }
}

void take_composite_state(const std::vector<std::unique_ptr<Optimizer>>& children,
                          OptimizerState&& state) {
  for (const auto& child : children) {
    OptimizerState part;
    for (const std::string& name : owned_param_names(*child)) {
      if (auto node = state.extract(name)) part.insert(std::move(node));
    }
    child->take_state_dict(std::move(part));
  }
}

void check_no_unknown_params(const Optimizer& optimizer, const OptimizerState& state,
                             std::string_view what) {
  const std::set<std::string> known = owned_param_names(optimizer);
  for (const auto& [name, entry] : state) {
    SW_REQUIRE(known.count(name) == 1, FormatError, what, " state dict has an entry for param ",
               name, ", which this optimizer does not own");
  }
}

float step_to_float(std::int64_t step) {
  SW_REQUIRE(step >= 0 && step <= (std::int64_t{1} << 24), InvalidArgument, "step count ", step,
             " cannot be stored exactly in a float state field");
  return static_cast<float>(step);
}

std::int64_t step_from_float(float value, const std::string& param, std::string_view what) {
  SW_REQUIRE(std::isfinite(value) && value >= 0.0f && value == std::floor(value), FormatError, what,
             " state dict field 'step' of param ", param,
             " is not a non-negative integer: ", value);
  // Saves store steps up to 2^24 only (step_to_float): a larger one is not a saved step.
  SW_REQUIRE(value <= static_cast<float>(std::int64_t{1} << 24), FormatError, what,
             " state dict field 'step' of param ", param, " is ", value,
             ", beyond the 2^24 steps a checkpoint stores exactly");
  return static_cast<std::int64_t>(value);
}

}  // namespace shardwise::optim
