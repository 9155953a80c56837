// The config's optimizer section in the optim layer's terms: the mode and both optimizers'
// options (a layer-wise run uses Muon for matrices and AdamW for the rest).
#include "training_run.hpp"

namespace shardwise::train_detail {
namespace {

optim::OptimizerMode optimizer_mode(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::kLayerWise:
      return optim::OptimizerMode::kLayerWise;
    case OptimizerKind::kDistributed:
      return optim::OptimizerMode::kDistributed;
    case OptimizerKind::kDdp:
      return optim::OptimizerMode::kDdp;
    case OptimizerKind::kLegacyLayerWise:
      return optim::OptimizerMode::kLegacyLayerWise;
  }
  return optim::OptimizerMode::kLayerWise;
}

optim::NewtonSchulzOptions newton_schulz(const OptimizerConfig& o) {
  optim::NewtonSchulzOptions ns;
  ns.steps = o.muon_ns_steps;
  ns.coefficients = o.muon_coefficient_set == MuonCoefficientSet::kQuintic
                        ? optim::NsCoefficients::kQuintic
                    : o.muon_coefficient_set == MuonCoefficientSet::kSimple
                        ? optim::NsCoefficients::kSimple
                        : optim::NsCoefficients::kPolarExpress;
  ns.precision = o.muon_matmul_precision == MatmulPrecision::kBf16 ? optim::MatmulPrecision::kBf16
                                                                   : optim::MatmulPrecision::kFp32;
  return ns;
}

optim::MuonScaleMode scale_mode(MuonScaleMode mode) {
  switch (mode) {
    case MuonScaleMode::kSpectral:
      return optim::MuonScaleMode::kSpectral;
    case MuonScaleMode::kUnitRmsNorm:
      return optim::MuonScaleMode::kUnitRmsNorm;
    case MuonScaleMode::kShapeScaling:
      return optim::MuonScaleMode::kShapeScaling;
  }
  return optim::MuonScaleMode::kShapeScaling;
}

}  // namespace

OptimizerChoice optimizer_choice(const OptimizerConfig& o) {
  OptimizerChoice c{optimizer_mode(o.kind), {}, {}};
  c.muon.lr = o.muon_lr;
  c.muon.weight_decay = o.weight_decay;
  c.muon.momentum = o.muon_momentum;
  c.muon.nesterov = o.muon_nesterov;
  c.muon.newton_schulz = newton_schulz(o);
  c.muon.scale_mode = scale_mode(o.muon_scale_mode);
  c.muon.extra_scale_factor = o.muon_extra_scale_factor;
  c.muon.split_qkv = o.muon_split_qkv;
  c.adamw.lr = o.lr;
  c.adamw.weight_decay = o.weight_decay;
  c.adamw.beta1 = o.adam_beta1;
  c.adamw.beta2 = o.adam_beta2;
  c.adamw.eps = o.adam_eps;
  return c;
}

}  // namespace shardwise::train_detail
