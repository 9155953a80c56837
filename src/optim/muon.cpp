#include "shardwise/optim/muon.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <span>
#include <utility>

#include "shardwise/config/optimizer_hyperparameters.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/core/tensor_view.hpp"

namespace shardwise::optim {

double muon_scale_factor(MuonScaleMode mode, std::int64_t rows, std::int64_t cols) {
  const double m = static_cast<double>(rows);
  const double n = static_cast<double>(cols);
  switch (mode) {
    case MuonScaleMode::kSpectral:
      return std::sqrt(std::max(m, n));
    case MuonScaleMode::kUnitRmsNorm:
      return std::sqrt(m / n);
    case MuonScaleMode::kShapeScaling:
      return std::sqrt(std::max(1.0, m / n));
    case MuonScaleMode::kAdamwMatchedRms:
      return 0.2 * std::sqrt(std::max(m, n));
  }
  SW_CHECK(false, "unknown Muon scale mode");
  return 0.0;
}

MuonScaleMode parse_muon_scale_mode(std::string_view name, std::string_view what) {
  if (auto mode = parse_enum<MuonScaleMode>(name)) return *mode;
  throw InvalidArgument(str_cat(what, ": unknown Muon scale mode '", name,
                                "' (valid: ", enum_choices<MuonScaleMode>(), ")"));
}

std::string_view muon_scale_mode_name(MuonScaleMode mode) { return to_string(mode); }

Muon::Muon(std::vector<ParamGroup> groups, MuonOptions defaults, ShardMathPtr math)
    : Optimizer(std::move(groups), std::move(math)),
      defaults_(std::move(defaults)),
      step_(math_->make_muon_step(defaults_)) {
  OptimizerHyperparameters values;
  values.muon_lr = defaults_.lr;
  values.weight_decay = defaults_.weight_decay;
  values.momentum = defaults_.momentum;
  values.ns_steps = defaults_.newton_schulz.steps;
  values.extra_scale_factor = defaults_.extra_scale_factor;
  validate(values, optimizer_field_names("MuonOptions"));
  // A zero grad matrix is normalised by its norm + eps: eps 0 would divide by zero.
  SW_REQUIRE(defaults_.newton_schulz.eps > 0 && std::isfinite(defaults_.newton_schulz.eps),
             InvalidArgument, "MuonOptions.newton_schulz.eps must be finite and > 0 (got ",
             defaults_.newton_schulz.eps, ")");
  validate_params("Muon");
  for (const ParamGroup& group : groups_) {
    for (const OptimParam& p : group.params) {
      validate_matrix(p);
      momentum_for(p);
    }
  }
}

void Muon::validate_matrix(const OptimParam& p) {
  SW_REQUIRE(p.shape.size() == 2, ShapeError, "Muon: param ", p.name, " has ", p.shape.size(),
             " dims; Muon only updates 2-D weights (route it to AdamW)");
  if (p.qkv_split.empty()) return;
  std::int64_t total = 0;
  for (std::int64_t r : p.qkv_split) {
    SW_REQUIRE(r > 0, ShapeError, "Muon: param ", p.name, " has a qkv_split part of ", r, " rows");
    total += r;
  }
  SW_REQUIRE(total == p.shape[0], ShapeError, "Muon: qkv_split of param ", p.name, " sums to ",
             total, " rows but the param has ", p.shape[0]);
}

FloatArray& Muon::momentum_for(const OptimParam& p) {
  const std::int64_t n = p.numel();
  auto [it, inserted] = momentum_.try_emplace(p.name);
  if (inserted) it->second = math_->zeros(n);
  SW_REQUIRE(it->second.size() == n, ShapeError, "Muon: param ", p.name, " has ", n,
             " elements but its momentum buffer has ", it->second.size());
  return it->second;
}

namespace {

// The CPU path of one matrix: the element loops here, Newton–Schulz in optim::NewtonSchulz, and
// tensor-parallel params orthogonalised on their gathered full matrix.
class HostMuonStep final : public MuonMatrixStep {
 public:
  explicit HostMuonStep(const MuonOptions& options)
      : defaults_(options), newton_schulz_(options.newton_schulz) {}

  void step(const OptimParam& p, float* momentum, double lr, double wd, double mu) override;

 private:
  // update_ <- lr * scale * NS(update_) per part, computed on the full matrix of a TP shard.
  void scaled_update_of_shard(const OptimParam& p, const TensorParallelSplit& split, double lr);

  MuonOptions defaults_;
  NewtonSchulz newton_schulz_;
  std::vector<float> update_;  // workspace: u, then NS(u)
};

void HostMuonStep::step(const OptimParam& p, float* momentum, double lr, double wd, double mu) {
  const auto n = static_cast<std::size_t>(p.numel());
  if (n == 0) return;
  float* __restrict param = p.main_param;
  const float* __restrict grad = p.grad;
  float* __restrict mom = momentum;

  if (wd != 0.0) {
    const auto decay = static_cast<float>(1.0 - lr * wd);
    for (std::size_t i = 0; i < n; ++i) param[i] *= decay;
  }

  const auto keep = static_cast<float>(mu);
  const auto blend = static_cast<float>(1.0 - mu);
  update_.resize(n);
  float* __restrict u = update_.data();
  for (std::size_t i = 0; i < n; ++i) mom[i] = keep * mom[i] + blend * grad[i];
  if (defaults_.nesterov) {
    for (std::size_t i = 0; i < n; ++i) u[i] = blend * grad[i] + keep * mom[i];
  } else {
    std::copy(mom, mom + n, u);
  }

  if (const auto tp = defaults_.tensor_parallel.find(p.name);
      tp != defaults_.tensor_parallel.end()) {
    scaled_update_of_shard(p, tp->second, lr);
    for (std::size_t i = 0; i < n; ++i) param[i] -= u[i];
    return;
  }
  const std::int64_t rows = p.shape[0];
  const std::int64_t cols = p.shape[1];
  std::vector<std::int64_t> parts = {rows};
  if (defaults_.split_qkv && !p.qkv_split.empty()) parts = p.qkv_split;
  newton_schulz_.orthogonalize_row_blocks(u, rows, cols, parts, u);

  std::int64_t first = 0;
  for (std::int64_t part_rows : parts) {
    const double scale =
        muon_scale_factor(defaults_.scale_mode, part_rows, cols) * defaults_.extra_scale_factor;
    const auto step = static_cast<float>(lr * scale);
    const std::size_t begin = static_cast<std::size_t>(first * cols);
    const std::size_t end = static_cast<std::size_t>((first + part_rows) * cols);
    for (std::size_t i = begin; i < end; ++i) param[i] -= step * u[i];
    first += part_rows;
  }
}

void HostMuonStep::scaled_update_of_shard(const OptimParam& p, const TensorParallelSplit& split,
                                          double lr) {
  std::vector<float> full = gather_full_matrix(split, update_.data(), p.shape[0], p.shape[1]);
  const std::vector<std::int64_t> shape = full_matrix_shape(split, p.shape[0], p.shape[1]);
  const std::int64_t rows = shape[0], cols = shape[1];
  std::vector<std::int64_t> parts = {rows};
  if (defaults_.split_qkv && !p.qkv_split.empty()) {
    // A row split keeps every part's share of each shard: the full parts are tp times larger.
    parts = p.qkv_split;
    if (split.partition_dim == 0) {
      for (std::int64_t& r : parts) r *= split.group->size();
    }
  }
  newton_schulz_.orthogonalize_row_blocks(full.data(), rows, cols, parts, full.data());
  std::int64_t first = 0;
  for (std::int64_t part_rows : parts) {
    const double scale =
        muon_scale_factor(defaults_.scale_mode, part_rows, cols) * defaults_.extra_scale_factor;
    const auto step = static_cast<float>(lr * scale);
    for (std::int64_t i = first * cols; i < (first + part_rows) * cols; ++i) {
      full[static_cast<std::size_t>(i)] *= step;
    }
    first += part_rows;
  }
  take_matrix_shard(split, full.data(), rows, cols, update_.data());
}

}  // namespace

std::unique_ptr<MuonMatrixStep> make_host_muon_step(const MuonOptions& options) {
  return std::make_unique<HostMuonStep>(options);
}

bool Muon::step_with_ready_grads() {
  for (std::size_t g = 0; g < groups_.size(); ++g) step_group(g);
  return true;
}

bool Muon::step_group(std::size_t index) {
  SW_REQUIRE(index < groups_.size(), InvalidArgument, "Muon: no param group ", index,
             " (there are ", groups_.size(), ")");
  const ParamGroup& group = groups_[index];
  const GroupOverrides& o = group.overrides;
  const double lr = o.lr.value_or(defaults_.lr);
  const double wd = o.weight_decay.value_or(defaults_.weight_decay);
  const double mu = o.momentum.value_or(defaults_.momentum);
  for (const OptimParam& p : group.params) {
    if (p.grad == nullptr || has_no_grad(p.name)) continue;
    validate_matrix(p);  // groups may have been edited since construction
    const GroupOverrides* found = param_overrides(p.name);
    const GroupOverrides& po = found != nullptr ? *found : kNoParamOverrides;
    step_->step(p, momentum_for(p).data(), override_or(po.lr, lr), override_or(po.weight_decay, wd),
                override_or(po.momentum, mu));
  }
  return true;
}

OptimizerState Muon::state_dict() const {
  OptimizerState out;
  for (const ParamGroup& group : groups_) {
    for (const OptimParam& p : group.params) {
      const auto it = momentum_.find(p.name);
      out[p.name]["momentum_buffer"] =
          it != momentum_.end() ? math_->to_host(it->second.data(), it->second.size())
                                : std::vector<float>(static_cast<std::size_t>(p.numel()), 0.0f);
    }
  }
  return out;
}

OptimizerStateView Muon::state_view() const {
  OptimizerStateView view;
  for (const ParamGroup& group : groups_) {
    for (const OptimParam& p : group.params) {
      const auto it = momentum_.find(p.name);
      view.fields_of(p.name)["momentum_buffer"] =
          it != momentum_.end()
              ? math_->view_values(it->second, view)
              : view.hold(std::vector<float>(static_cast<std::size_t>(p.numel()), 0.0f));
    }
  }
  return view;
}

void Muon::check_owned_state(const OptimizerState& state) const {
  for (const ParamGroup& group : groups_) {
    for (const OptimParam& p : group.params) {
      state_field(param_entry(state, p.name, "Muon"), p.name, "momentum_buffer", p.numel(), "Muon");
    }
  }
}

void Muon::load_state_dict(const OptimizerState& state) {
  check_state_dict(state);
  for (const ParamGroup& group : groups_) {
    for (const OptimParam& p : group.params) {
      momentum_[p.name] = math_->adopt(std::vector<float>(state.at(p.name).at("momentum_buffer")));
    }
  }
}

void Muon::take_state_dict(OptimizerState&& state) {
  check_state_dict(state);
  for (const ParamGroup& group : groups_) {
    for (const OptimParam& p : group.params) {
      momentum_[p.name] = math_->adopt(std::move(state.at(p.name).at("momentum_buffer")));
    }
  }
}

std::optional<StateLoadTargets> Muon::state_load_targets() {
  if (math_->device() != TensorView::kHostMemory) return std::nullopt;
  StateLoadTargets out;
  for (const ParamGroup& group : groups_) {
    for (const OptimParam& p : group.params) {
      FloatArray& momentum = momentum_for(p);
      out[p.name].arrays["momentum_buffer"] = {momentum.data(),
                                               static_cast<std::size_t>(momentum.size())};
    }
  }
  return out;
}

}  // namespace shardwise::optim
