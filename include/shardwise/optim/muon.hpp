// Muon (MomentUm Orthogonalized by Newton–Schulz) for 2-D weights. Per step and param:
//   p <- p - lr*wd*p                       (decoupled weight decay, first)
//   buf <- mu*buf + (1-mu)*g
//   u <- nesterov ? (1-mu)*g + mu*buf : buf
//   for each part of p (the whole matrix, or Q/K/V of a fused QKV weight with split_qkv):
//     p_part <- p_part - lr * scale(part rows, cols) * extra_scale_factor * NS(u_part)
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "shardwise/optim/newton_schulz.hpp"
#include "shardwise/optim/optimizer.hpp"
#include "shardwise/optim/tensor_parallel_matrix.hpp"

namespace shardwise::optim {

// How the orthogonalized update is scaled: the optimizer spec's enum (config/optimizer_config.hpp).
using MuonScaleMode = shardwise::MuonScaleMode;

// The factor before extra_scale_factor.
double muon_scale_factor(MuonScaleMode mode, std::int64_t rows, std::int64_t cols);

// Parses the names of kMuonScaleModeNames ("spectral", ...); InvalidArgument naming `what`.
MuonScaleMode parse_muon_scale_mode(std::string_view name, std::string_view what);
std::string_view muon_scale_mode_name(MuonScaleMode mode);

// Defaults: the optimizer spec's (kDefaultOptimizerConfig), never a second set.
struct MuonOptions {
  double lr = kDefaultOptimizerConfig.muon_lr;
  double weight_decay = kDefaultOptimizerConfig.weight_decay;
  double momentum = kDefaultOptimizerConfig.muon_momentum;
  bool nesterov = kDefaultOptimizerConfig.muon_nesterov;
  NewtonSchulzOptions newton_schulz;
  MuonScaleMode scale_mode = kDefaultOptimizerConfig.muon_scale_mode;
  double extra_scale_factor = kDefaultOptimizerConfig.muon_extra_scale_factor;
  // Orthogonalize the Q, K and V parts of params that carry a qkv_split separately.
  bool split_qkv = kDefaultOptimizerConfig.muon_split_qkv;
  // Tensor parallelism, by param name: these params are TP shards of a larger matrix; Muon
  // orthogonalises (and scales by the shape of) the full matrix, gathered over the TP group, so
  // the update equals the unsharded one. Every rank of the TP group steps such a param together.
  // make_optimizer refuses a name that is no param of its chunks.
  std::map<std::string, TensorParallelSplit> tensor_parallel;
};

// The CPU path's per-matrix step (what host_shard_math().make_muon_step returns).
std::unique_ptr<MuonMatrixStep> make_host_muon_step(const MuonOptions& options);

class Muon : public Optimizer {
 public:
  // Throws ShapeError naming the param for any param that is not 2-D or whose qkv_split does
  // not add up to its rows. `math` says where the params, grads and momentum live and runs the
  // per-matrix step (the host by default).
  Muon(std::vector<ParamGroup> groups, MuonOptions defaults, ShardMathPtr math = host_shard_math());

  std::string_view kind() const override { return "muon"; }
  bool step_with_ready_grads() override;
  // Updates the params of param_groups()[index] only (a distributed wrapper steps one group at a
  // time so it can ship each group as soon as it is updated). Throws InvalidArgument when out of
  // range.
  bool step_group(std::size_t index);
  OptimizerState state_dict() const override;
  OptimizerStateView state_view() const override;
  void load_state_dict(const OptimizerState& state) override;
  void check_owned_state(const OptimizerState& state) const override;
  void take_state_dict(OptimizerState&& state) override;
  std::optional<StateLoadTargets> state_load_targets() override;

  const MuonOptions& defaults() const { return defaults_; }

 private:
  // Checks shape and QKV split; throws ShapeError naming the param.
  static void validate_matrix(const OptimParam& p);
  // Zero momentum for params seen for the first time.
  FloatArray& momentum_for(const OptimParam& p);

  MuonOptions defaults_;
  std::unique_ptr<MuonMatrixStep> step_;
  // Keyed by param name, so a wrapper may narrow or regroup param_groups() between steps.
  std::map<std::string, FloatArray> momentum_;
};

}  // namespace shardwise::optim
