// OptimizerConfig, the optimizer spec: which optimizer to build and its hyperparameters (AdamW
// for non-matrix params, Muon for 2-D weights). Every front end parses into it — the YAML
// config's optimizer section and the Python package (shardwise.torch.make_optimizer) — and
// optim::build_optimizer builds from it, so the kinds, the names of every choice and the
// defaults exist once, here. The optim layer's own option structs (AdamWOptions, MuonOptions,
// NewtonSchulzOptions) take their defaults from kDefaultOptimizerConfig and use these enums.
//
// Adding a field: a member here, its YAML key (training_config_io.cpp), its Python keyword
// (python/src/optimizer_spec_keywords.cpp) and the line that hands it to the optim layer
// (muon_options / adamw_options, src/optim/data_parallel_setup.cpp). Adding a kind: its enum
// value and name here, then its row in optim/optimizer_kinds.cpp.
#pragma once

#include <cstdint>
#include <span>

#include "shardwise/config/enum_names.hpp"

namespace shardwise {

enum class OptimizerKind {
  kLayerWise,        // LayerWiseDistributedOptimizer with the shard-aligned buffer layout
  kDistributed,      // DistributedOptimizer (element-sharded)
  kDdp,              // plain DDP: all-reduce, every rank runs the full optimizer
  kLegacyLayerWise,  // layer-wise optimizer on all-reduce + all_gather_v param sync
};
inline constexpr EnumName<OptimizerKind> kOptimizerKindNames[] = {
    {OptimizerKind::kLayerWise, "layer-wise"},
    {OptimizerKind::kDistributed, "distributed"},
    {OptimizerKind::kDdp, "ddp"},
    {OptimizerKind::kLegacyLayerWise, "legacy-layer-wise"},
};
inline std::span<const EnumName<OptimizerKind>> enum_names(OptimizerKind) {
  return kOptimizerKindNames;
}

// Layer-wise and distributed shard optimizer state and reduce-scatter grads (then all-gather the
// updated params); ddp and legacy-layer-wise all-reduce whole grads.
constexpr bool is_distributed_optimizer(OptimizerKind kind) {
  return kind == OptimizerKind::kLayerWise || kind == OptimizerKind::kDistributed;
}

// Only ddp runs the whole optimizer on every rank (all grads, all state); the other kinds keep
// 1/dp of the optimizer state per rank, so their grad statistics are sums over the group.
constexpr bool shards_optimizer_state(OptimizerKind kind) { return kind != OptimizerKind::kDdp; }

// Newton–Schulz iteration coefficients.
enum class MuonCoefficientSet : std::uint8_t { kQuintic, kSimple, kPolarExpress };
inline constexpr EnumName<MuonCoefficientSet> kMuonCoefficientSetNames[] = {
    {MuonCoefficientSet::kQuintic, "quintic"},
    {MuonCoefficientSet::kSimple, "simple"},
    {MuonCoefficientSet::kPolarExpress, "polar_express"},
};
inline std::span<const EnumName<MuonCoefficientSet>> enum_names(MuonCoefficientSet) {
  return kMuonCoefficientSetNames;
}

// How the Newton–Schulz polynomial steps are carried out (same coefficients, same result in exact
// arithmetic; optim/newton_schulz.hpp).
enum class NsAlgorithm : std::uint8_t {
  kStandard,  // X <- p(X X^T) X every step
  kGram,      // iterate on the short side's Gram matrix, apply the accumulated polynomial once
};
inline constexpr EnumName<NsAlgorithm> kNsAlgorithmNames[] = {
    {NsAlgorithm::kStandard, "standard"},
    {NsAlgorithm::kGram, "gram"},
};
inline std::span<const EnumName<NsAlgorithm>> enum_names(NsAlgorithm) { return kNsAlgorithmNames; }

// How the orthogonalised update of an m x n (rows x cols, i.e. out x in) matrix is scaled to its
// shape (optim::muon_scale_factor).
enum class MuonScaleMode : std::uint8_t {
  kSpectral,         // sqrt(max(m, n)) (default)
  kUnitRmsNorm,      // sqrt(m / n)
  kShapeScaling,     // sqrt(max(1, m / n))
  kAdamwMatchedRms,  // 0.2 * sqrt(max(m, n)): update RMS close to AdamW's, so AdamW lr/wd work
};
inline constexpr EnumName<MuonScaleMode> kMuonScaleModeNames[] = {
    {MuonScaleMode::kSpectral, "spectral"},
    {MuonScaleMode::kUnitRmsNorm, "unit_rms_norm"},
    {MuonScaleMode::kShapeScaling, "shape_scaling"},
    {MuonScaleMode::kAdamwMatchedRms, "adamw_matched_rms"},
};
inline std::span<const EnumName<MuonScaleMode>> enum_names(MuonScaleMode) {
  return kMuonScaleModeNames;
}

// Precision of the Newton–Schulz matmuls.
enum class MatmulPrecision : std::uint8_t { kFp32, kBf16 };
inline constexpr EnumName<MatmulPrecision> kMatmulPrecisionNames[] = {
    {MatmulPrecision::kFp32, "fp32"},
    {MatmulPrecision::kBf16, "bf16"},
};
inline std::span<const EnumName<MatmulPrecision>> enum_names(MatmulPrecision) {
  return kMatmulPrecisionNames;
}

struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::kLayerWise;
  double lr = 1e-3;      // AdamW (non-matrix params; every param with kind ddp/distributed)
  double min_lr = 1e-4;  // floor of the LR schedule
  // Muon (2-D weights); follows the same schedule as lr. The spectral scale gives updates of RMS
  // ~1 per element, so Muon wants an lr close to AdamW's (0.02 belongs to unit-RMS scaling).
  double muon_lr = 0.002;
  double weight_decay = 0.01;
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.999;
  double adam_eps = 1e-8;
  double muon_momentum = 0.95;
  bool muon_nesterov = true;
  int muon_ns_steps = 5;
  MuonCoefficientSet muon_coefficient_set = MuonCoefficientSet::kQuintic;
  NsAlgorithm muon_ns_algorithm = NsAlgorithm::kStandard;
  MuonScaleMode muon_scale_mode = MuonScaleMode::kSpectral;
  double muon_extra_scale_factor = 1.0;
  bool muon_split_qkv = true;  // orthogonalise Q, K and V separately
  MatmulPrecision muon_matmul_precision = MatmulPrecision::kFp32;
  double clip_grad = 1.0;  // global grad-norm clip; 0 disables clipping
  // Gather during the step: the distributed optimizers (layer-wise, distributed) update one
  // bucket group at a time and dispatch its param all-gather right after, so it overlaps the
  // next group's update (docs/optimizer_overlap.md). Any pipeline size; a value given under
  // comm_overlap (Megatron's rule: interleaved pipeline only) replaces it in
  // CommOverlapConfig::setup().
  bool overlap_param_gather_with_optimizer_step = false;

  constexpr bool use_distributed_optimizer() const { return is_distributed_optimizer(kind); }

  bool operator==(const OptimizerConfig&) const = default;
};

// The one set of defaults: what an empty YAML optimizer section, make_optimizer() without
// keywords and a default-constructed optim::MuonOptions / AdamWOptions all mean.
inline constexpr OptimizerConfig kDefaultOptimizerConfig{};

// Throws ConfigError naming the field ("optimizer.lr") for out-of-range values.
void validate(const OptimizerConfig& config);

}  // namespace shardwise
