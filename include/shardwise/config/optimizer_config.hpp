// OptimizerConfig: which optimizer the trainer builds and its hyperparameters (AdamW for
// non-matrix params, Muon for 2-D weights).
#pragma once

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

// Newton–Schulz iteration coefficients.
enum class MuonCoefficientSet { kQuintic, kSimple, kPolarExpress };
inline constexpr EnumName<MuonCoefficientSet> kMuonCoefficientSetNames[] = {
    {MuonCoefficientSet::kQuintic, "quintic"},
    {MuonCoefficientSet::kSimple, "simple"},
    {MuonCoefficientSet::kPolarExpress, "polar_express"},
};
inline std::span<const EnumName<MuonCoefficientSet>> enum_names(MuonCoefficientSet) {
  return kMuonCoefficientSetNames;
}

// How the orthogonalised update is scaled to the weight's shape.
enum class MuonScaleMode { kSpectral, kUnitRmsNorm, kShapeScaling };
inline constexpr EnumName<MuonScaleMode> kMuonScaleModeNames[] = {
    {MuonScaleMode::kSpectral, "spectral"},
    {MuonScaleMode::kUnitRmsNorm, "unit_rms_norm"},
    {MuonScaleMode::kShapeScaling, "shape_scaling"},
};
inline std::span<const EnumName<MuonScaleMode>> enum_names(MuonScaleMode) {
  return kMuonScaleModeNames;
}

// Precision of the Newton–Schulz matmuls.
enum class MatmulPrecision { kFp32, kBf16 };
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
  MuonScaleMode muon_scale_mode = MuonScaleMode::kSpectral;
  double muon_extra_scale_factor = 1.0;
  bool muon_split_qkv = true;  // orthogonalise Q, K and V separately
  MatmulPrecision muon_matmul_precision = MatmulPrecision::kFp32;
  double clip_grad = 1.0;  // global grad-norm clip; 0 disables clipping
  // Overlap the param all-gather with the optimizer step (distributed optimizer, interleaved
  // pipeline only); set by CommOverlapConfig::setup().
  bool overlap_param_gather_with_optimizer_step = false;

  // Layer-wise and distributed shard optimizer state (reduce-scatter + all-gather); ddp and
  // legacy-layer-wise all-reduce gradients.
  bool use_distributed_optimizer() const {
    return kind == OptimizerKind::kLayerWise || kind == OptimizerKind::kDistributed;
  }

  bool operator==(const OptimizerConfig&) const = default;
};

// Throws ConfigError naming the field ("optimizer.lr") for out-of-range values.
void validate(const OptimizerConfig& config);

}  // namespace shardwise
