// The local (single-process) optimizer interface. An optimizer is handed views of the parameters
// it owns (fp32 main params and their fp32 grads, which live in buffers owned by someone else),
// keeps its state keyed by parameter name, and updates the main params in place.
//
// step() runs the Megatron pipeline: prepare_grads -> global grad norm -> clip -> (zero count) ->
// step_with_ready_grads. The "global" reductions go through a pluggable WorldReduce so a
// distributed wrapper can sum over ranks; a local optimizer sums over itself only.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "shardwise/config/optimizer_hyperparameters.hpp"
#include "shardwise/optim/optimizer_state_view.hpp"
#include "shardwise/optim/shard_math.hpp"

namespace shardwise::optim {

// One parameter as an optimizer sees it: views, never copies.
struct OptimParam {
  std::string name;                 // unique within an optimizer; keys its state
  std::vector<std::int64_t> shape;  // [] means a scalar; Muon needs exactly 2 dims
  float* main_param = nullptr;      // fp32 main (master) weights, updated in place
  // fp32 gradient, same numel. Mutable because clipping scales it in place (as Megatron does);
  // null means "no grad this step": the param and its state are left untouched.
  float* grad = nullptr;
  // Fused QKV weight: row counts of the query, key and value parts (sum == shape[0]). Muon
  // orthogonalizes each part on its own when split_qkv is on; empty for other params.
  std::vector<std::int64_t> qkv_split;

  std::int64_t numel() const;
};

// Hyperparameters a group may override; unset fields take the optimizer's defaults.
struct GroupOverrides {
  std::optional<double> lr;
  std::optional<double> weight_decay;
  std::optional<double> beta1;     // AdamW
  std::optional<double> beta2;     // AdamW
  std::optional<double> eps;       // AdamW
  std::optional<double> momentum;  // Muon
};

// Hyperparameters of single params, by param name: they win over their group's overrides and the
// defaults. A front end with its own param groups (torch's param_groups, which need not match the
// engine's bucket groups or shards) sets them; a param without an entry follows its group.
using ParamOverrides = std::map<std::string, GroupOverrides>;

inline const GroupOverrides kNoParamOverrides{};

// The spec's range checks (config/optimizer_hyperparameters.hpp) on the values `overrides` sets:
// ConfigError naming "<where>.<field>" (a NaN lr or a beta of 1 would turn every param into NaN).
void validate_overrides(const GroupOverrides& overrides, std::string_view where);
// What validate_overrides and the optimizers' constructors call the fields ("<where>.lr", ...).
OptimizerFieldNames optimizer_field_names(std::string_view where);

// `param`'s value when set, else `fallback` (the group's or the default).
inline double override_or(const std::optional<double>& param, double fallback) {
  return param.value_or(fallback);
}

struct ParamGroup {
  std::string name;
  std::vector<OptimParam> params;
  GroupOverrides overrides;
};

// Per-parameter optimizer state: param name -> (state field -> values). Fields are named as in
// PyTorch ("exp_avg", "exp_avg_sq", "step", "momentum_buffer"); scalars are 1-element vectors.
using ParamState = std::map<std::string, std::vector<float>>;
using OptimizerState = std::map<std::string, ParamState>;

// Where a checkpoint load reads one param's state in place: each array field (by name, as in a
// ParamState) in the optimizer's own host memory, and the param's step count (null when the
// optimizer keeps none).
struct StateLoadTarget {
  std::map<std::string, std::span<float>> arrays;
  std::int64_t* step = nullptr;
};
using StateLoadTargets = std::map<std::string, StateLoadTarget>;

// Sums a locally computed value over the world (all ranks holding a part of the optimizer).
// Identity for a single process; an MPI all-reduce for distributed optimizers.
using WorldReduce = std::function<double(double local_value)>;

struct StepOptions {
  double clip_grad = 0.0;    // max global grad norm; <= 0 disables clipping
  bool count_zeros = false;  // report the number of zero grad elements
};

struct StepResult {
  bool stepped = false;  // false when the grad norm was not finite (step skipped)
  double grad_norm = 0.0;
  double clip_coeff = 1.0;  // factor the grads were scaled by (1 when not clipped)
  std::optional<std::int64_t> num_zeros;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  virtual std::string_view kind() const = 0;

  // prepare_grads -> grad norm -> clip -> zero count -> step_with_ready_grads. Skips the update
  // (stepped == false, params and state untouched) when the norm is NaN or infinite.
  StepResult step();

  // Makes the grads the optimizer will read ready (e.g. copies model grads into main grads).
  // Returns false to request the step be skipped. Default: nothing to do.
  virtual bool prepare_grads() { return true; }
  // Applies the update with the grads as they are now. Returns whether an update was applied.
  virtual bool step_with_ready_grads() = 0;

  // Global grad norm: sqrt(world_reduce(local_grad_sq_sum())).
  double get_grad_norm() const;
  // Global number of exactly-zero grad elements.
  std::int64_t count_zeros() const;

  // Per-group statistics (Megatron's grad-norm groups), by param-group name: whether any rank of
  // the world has params in such a group, and the global grad norm over just those params. Every
  // rank must call these with the same names (they are collectives when the world reduce is).
  bool has_grad_norm_group(std::string_view group) const;
  double grad_norm_for_group(std::string_view group) const;

  // Local contributions to the global statistics. A distributed variant overrides these to count
  // each element exactly once over the world (only its own shard).
  virtual double local_grad_sq_sum() const;
  virtual std::int64_t local_grad_zero_count() const;
  // This rank's sum of squares and number of params over the param groups named `group`.
  virtual double local_group_grad_sq_sum(std::string_view group) const;
  virtual std::int64_t local_group_param_count(std::string_view group) const;
  // Multiplies every grad this optimizer reads by coeff, in place.
  virtual void scale_grads(float coeff);

  virtual OptimizerState state_dict() const = 0;
  // The same state as state_dict(), as views without copies (what a checkpoint writes from).
  // Default: views of a state_dict() copy that the view holds.
  virtual OptimizerStateView state_view() const;
  // Restores state for every param this optimizer owns (each must be present with the right
  // sizes); entries for unknown params are an error. Throws naming the param and field.
  virtual void load_state_dict(const OptimizerState& state) = 0;
  // Throws where load_state_dict(state) would, changing nothing: a composite checks every child
  // before it loads any, so a bad dict leaves the whole optimizer as it was. Default: no entry
  // for a param this optimizer does not own, and check_owned_state.
  virtual void check_state_dict(const OptimizerState& state) const;
  // The entries of the params this optimizer owns must be present and well-formed; entries of
  // other params are not looked at. A composite runs it on each child over the whole dict, so no
  // child's part is copied out just to be checked. Default: nothing to check.
  virtual void check_owned_state(const OptimizerState& /*state*/) const {}
  // Same checks and result, but may move the vectors out of `state` instead of copying them
  // (a checkpoint load hands over the state it has just read). Default: load_state_dict.
  virtual void take_state_dict(OptimizerState&& state) { load_state_dict(state); }
  // Every owned param's state, writable in place (a param without state gets its zero state
  // first), for a checkpoint load that reads straight into it: no second copy of the state is
  // made, and a load that fails part-way leaves the state partly overwritten (as it leaves the
  // main params). Nullopt where the state is not in host memory: the load then reads into a
  // state_dict() and hands it over with take_state_dict. Valid until the next step or load.
  virtual std::optional<StateLoadTargets> state_load_targets() { return std::nullopt; }

  std::vector<ParamGroup>& param_groups() { return groups_; }
  const std::vector<ParamGroup>& param_groups() const { return groups_; }
  // Sets the learning rate of every group (what an LR scheduler calls each iteration).
  virtual void set_lr(double lr);
  // Re-reads the fp32 main copies of 16-bit model params from the param buffer: call it after
  // writing the model's params outside the optimizer (loading weights, initialising after the
  // optimizer was built), or the next step updates the old values and overwrites the new ones.
  // No-op where the main params are the buffer itself (fp32) or the optimizer keeps no copies.
  virtual void reload_model_params() {}
  // Replaces every per-param override (an empty map: all params follow their groups again).
  // Every name must be one of param_names() (InvalidArgument naming the first that is not: a
  // misspelt name would otherwise leave its param on the group's values). Wrappers pass each
  // child the entries of the params it steps.
  virtual void set_param_overrides(const ParamOverrides& overrides);
  // Every param this optimizer steps on some rank, by name: a sharded wrapper lists every param
  // of the buffers it manages, also those other ranks own. Default: the params of param_groups().
  virtual std::set<std::string> param_names() const;
  // The overrides of the param named `name`, or null when it has none.
  const GroupOverrides* param_overrides(const std::string& name) const;
  // Params (by name) that got no gradient in the coming step (unused by every rank's backward):
  // the step leaves their value, state and step count as they are, as torch's optimizers skip a
  // param whose .grad is None. Replaces the previous set; wrappers pass it on.
  virtual void set_params_without_grad(const std::set<std::string>& names);
  bool has_no_grad(const std::string& name) const {
    return !params_without_grad_.empty() && params_without_grad_.contains(name);
  }

  void set_world_reduce(WorldReduce reduce);
  // Replaces world_reduce(local_grad_sq_sum()) in get_grad_norm() (not the per-group norms):
  // ddp.reproducible_reduction sums whole params in a fixed order, which no shard boundary
  // changes, from grads every rank holds in full.
  void set_global_grad_sq_sum(std::function<double()> sum) { global_grad_sq_sum_ = std::move(sum); }
  // Params (by name) whose grads this rank leaves out of the global statistics (grad norm, zero
  // count): a tensor-parallel duplicate is counted by TP rank 0 only, so a sum over the DP and TP
  // groups counts it once. A wrapper passes the set on to its children.
  virtual void exclude_from_grad_stats(const std::set<std::string>& names);
  const StepOptions& step_options() const { return step_options_; }
  // Where the params, grads and state live and the element-wise math over them.
  const ShardMath& math() const { return *math_; }
  const ShardMathPtr& math_ptr() const { return math_; }
  void set_step_options(const StepOptions& options);

 protected:
  explicit Optimizer(std::vector<ParamGroup> groups, ShardMathPtr math = host_shard_math());
  // Whether `param`'s grad enters this rank's contributions to the global statistics (grad norm,
  // zero count, group norms and counts). False for a copy that another rank also holds and
  // counts (layer-wise shard groups: only the first replica counts), so every element is counted
  // once over the world.
  virtual bool counts_in_grad_statistics(const OptimParam& /*param*/) const { return true; }
  // Checks names are unique and views are non-null; `what` names the optimizer in errors.
  void validate_params(std::string_view what) const;
  // set_param_overrides' checks, made before anything changes: every value in the spec's range,
  // every name one of param_names().
  void check_param_overrides(const ParamOverrides& overrides) const;
  // The entries of `overrides` for the params `child` steps (what a wrapper hands that child).
  static ParamOverrides overrides_for(const Optimizer& child, const ParamOverrides& overrides);
  // Whether p's grad enters the local statistics: it has a grad, is not excluded (a TP
  // duplicate) and this rank counts it (counts_in_grad_statistics).
  bool counts_in_grad_stats(const OptimParam& p) const;

  std::vector<ParamGroup> groups_;
  ShardMathPtr math_;
  WorldReduce world_reduce_;
  std::function<double()> global_grad_sq_sum_;
  StepOptions step_options_;
  std::set<std::string> excluded_from_stats_;
  ParamOverrides param_overrides_;
  std::set<std::string> params_without_grad_;
};

// Clipping coefficient Megatron uses: max_norm / (norm + 1e-6), applied only when < 1.
double clip_coefficient(double total_norm, double max_norm);

// Convenience: one group holding `params`.
std::vector<ParamGroup> single_group(std::vector<OptimParam> params);

// State-dict helpers for optimizer implementations; errors name the optimizer (`what`), the
// param and the field.
const ParamState& param_entry(const OptimizerState& state, const std::string& param,
                              std::string_view what);
// What a state field's values may be: finite (moments, momentum, the step count), or also not
// negative (AdamW's exp_avg_sq, a running mean of squares: a negative one makes sqrt NaN).
enum class StateValues { kFinite, kFiniteNonNegative };
// The field, of `expected_size` values each as `values` allows (FormatError naming the first
// that is not: a NaN moment loaded from a dict turned every param NaN at the next step).
const std::vector<float>& state_field(const ParamState& entry, const std::string& param,
                                      std::string_view field, std::int64_t expected_size,
                                      std::string_view what,
                                      StateValues values = StateValues::kFinite);
void check_no_unknown_params(const Optimizer& optimizer, const OptimizerState& state,
                             std::string_view what);
// A composite's check_state_dict: every entry belongs to a param one of `children` owns
// (FormatError naming it otherwise), and each child's check_owned_state passes, over `state` as it
// is.
void check_composite_state(const std::vector<std::unique_ptr<Optimizer>>& children,
                           const OptimizerState& state, std::string_view what);
// A composite's load: hands each child the entries of the params it owns (take_state_dict), one
// child at a time, copied out of `state` or, with take_composite_state, moved out of it; so at
// most one child's part is ever held twice. Check the whole dict first.
void load_composite_state(const std::vector<std::unique_ptr<Optimizer>>& children,
                          const OptimizerState& state);
void take_composite_state(const std::vector<std::unique_ptr<Optimizer>>& children,
                          OptimizerState&& state);
// The state_load_targets of `children` merged (their params are disjoint), or nullopt when any
// child has none.
std::optional<StateLoadTargets> merged_state_load_targets(
    const std::vector<std::unique_ptr<Optimizer>>& children);
// Step counts travel as floats (state dicts are name -> float vectors); exact below 2^24.
float step_to_float(std::int64_t step);
std::int64_t step_from_float(float value, const std::string& param, std::string_view what);

}  // namespace shardwise::optim
