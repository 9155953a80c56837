// The optim layer's option structs against the optimizer spec: their defaults are the spec's
// (no second set), muon_options / adamw_options carry every field, the spec's name tables are
// the names the optim parsers accept.
#include <gtest/gtest.h>

#include "shardwise/config/optimizer_config.hpp"
#include "shardwise/optim/adamw.hpp"
#include "shardwise/optim/data_parallel_setup.hpp"
#include "shardwise/optim/muon.hpp"
#include "shardwise/optim/newton_schulz.hpp"
#include "shardwise/optim/optimizer_kinds.hpp"

namespace shardwise::optim {
namespace {

void expect_same_muon(const MuonOptions& a, const MuonOptions& b) {
  EXPECT_EQ(a.lr, b.lr);
  EXPECT_EQ(a.weight_decay, b.weight_decay);
  EXPECT_EQ(a.momentum, b.momentum);
  EXPECT_EQ(a.nesterov, b.nesterov);
  EXPECT_EQ(a.newton_schulz.steps, b.newton_schulz.steps);
  EXPECT_EQ(a.newton_schulz.coefficients, b.newton_schulz.coefficients);
  EXPECT_EQ(a.newton_schulz.algorithm, b.newton_schulz.algorithm);
  EXPECT_EQ(a.newton_schulz.precision, b.newton_schulz.precision);
  EXPECT_EQ(a.scale_mode, b.scale_mode);
  EXPECT_EQ(a.extra_scale_factor, b.extra_scale_factor);
  EXPECT_EQ(a.split_qkv, b.split_qkv);
}

void expect_same_adamw(const AdamWOptions& a, const AdamWOptions& b) {
  EXPECT_EQ(a.lr, b.lr);
  EXPECT_EQ(a.weight_decay, b.weight_decay);
  EXPECT_EQ(a.beta1, b.beta1);
  EXPECT_EQ(a.beta2, b.beta2);
  EXPECT_EQ(a.eps, b.eps);
}

TEST(OptimizerSpecOptions, DefaultConstructedOptionsAreTheSpecDefaults) {
  expect_same_muon(MuonOptions{}, muon_options(kDefaultOptimizerConfig));
  expect_same_adamw(AdamWOptions{}, adamw_options(kDefaultOptimizerConfig));
  EXPECT_EQ(MuonOptions{}.lr, 0.002);
  EXPECT_TRUE(MuonOptions{}.nesterov);
}

TEST(OptimizerSpecOptions, EveryFieldIsCarried) {
  OptimizerConfig spec;
  spec.lr = 3e-3;
  spec.muon_lr = 0.03;
  spec.weight_decay = 0.2;
  spec.adam_beta1 = 0.8;
  spec.adam_beta2 = 0.95;
  spec.adam_eps = 1e-6;
  spec.muon_momentum = 0.9;
  spec.muon_nesterov = false;
  spec.muon_ns_steps = 7;
  spec.muon_coefficient_set = MuonCoefficientSet::kPolarExpress;
  spec.muon_ns_algorithm = NsAlgorithm::kGram;
  spec.muon_scale_mode = MuonScaleMode::kAdamwMatchedRms;
  spec.muon_extra_scale_factor = 0.5;
  spec.muon_split_qkv = false;
  spec.muon_matmul_precision = MatmulPrecision::kBf16;
  MuonOptions muon;
  muon.lr = 0.03;
  muon.weight_decay = 0.2;
  muon.momentum = 0.9;
  muon.nesterov = false;
  muon.newton_schulz.steps = 7;
  muon.newton_schulz.coefficients = NsCoefficients::kPolarExpress;
  muon.newton_schulz.algorithm = NsAlgorithm::kGram;
  muon.newton_schulz.precision = MatmulPrecision::kBf16;
  muon.scale_mode = MuonScaleMode::kAdamwMatchedRms;
  muon.extra_scale_factor = 0.5;
  muon.split_qkv = false;
  expect_same_muon(muon_options(spec), muon);
  AdamWOptions adamw;
  adamw.lr = 3e-3;
  adamw.weight_decay = 0.2;
  adamw.beta1 = 0.8;
  adamw.beta2 = 0.95;
  adamw.eps = 1e-6;
  expect_same_adamw(adamw_options(spec), adamw);
}

TEST(OptimizerSpecOptions, TheParsersAcceptExactlyTheSpecsNames) {
  for (const auto& [mode, name] : kMuonScaleModeNames) {
    EXPECT_EQ(parse_muon_scale_mode(name, "scale_mode"), mode);
    EXPECT_EQ(muon_scale_mode_name(mode), name);
  }
  for (const auto& [set, name] : kMuonCoefficientSetNames) {
    EXPECT_EQ(parse_ns_coefficients(name, "coefficients"), set);
    EXPECT_EQ(ns_coefficients_name(set), name);
  }
  for (const auto& [algorithm, name] : kNsAlgorithmNames) {
    EXPECT_EQ(parse_ns_algorithm(name, "ns_algorithm"), algorithm);
    EXPECT_EQ(ns_algorithm_name(algorithm), name);
  }
  EXPECT_THROW(parse_muon_scale_mode("Spectral", "scale_mode"), InvalidArgument);
  EXPECT_THROW(parse_ns_coefficients("cubic", "coefficients"), InvalidArgument);
}

// Every kind the spec names has a recipe, and the recipe agrees with the spec on the grad sync:
// a kind that reduce-scatters needs an element- or layer-sharded layout, one that all-reduces the
// plain layout.
TEST(OptimizerSpecOptions, EveryKindOfTheSpecHasARecipeThatAgreesWithIt) {
  for (const auto& [kind, name] : kOptimizerKindNames) {
    const OptimizerKindRecipe& recipe = recipe_of(kind);
    EXPECT_EQ(recipe.kind, kind) << name;
    EXPECT_NE(recipe.build, nullptr) << name;
    EXPECT_EQ(is_distributed_optimizer(kind), recipe.layout != LayoutAlgorithm::kDefault) << name;
    EXPECT_FALSE(recipe.legacy_param_sync && is_distributed_optimizer(kind)) << name;
  }
  EXPECT_THROW(recipe_of(static_cast<OptimizerKind>(99)), InvalidArgument);
}

}  // namespace
}  // namespace shardwise::optim
