// The optimizer spec (OptimizerConfig): one set of defaults, one name table per choice, the YAML
// optimizer section parsing into it.
#include <gtest/gtest.h>

#include <string>

#include "shardwise/config/optimizer_config.hpp"
#include "shardwise/config/optimizer_hyperparameters.hpp"
#include "shardwise/config/training_config.hpp"

namespace shardwise {
namespace {

TEST(OptimizerSpec, AnEmptyYamlOptimizerSectionIsTheSpecDefaults) {
  EXPECT_EQ(parse_training_config("optimizer: {}").optimizer, kDefaultOptimizerConfig);
  EXPECT_EQ(parse_training_config("").optimizer, kDefaultOptimizerConfig);
  EXPECT_EQ(OptimizerConfig{}, kDefaultOptimizerConfig);
}

// The values the main job and the tests are tuned to; changing one is a deliberate act.
TEST(OptimizerSpec, DefaultsAreTheTrainersTunedValues) {
  const OptimizerConfig& d = kDefaultOptimizerConfig;
  EXPECT_EQ(d.kind, OptimizerKind::kLayerWise);
  EXPECT_EQ(d.lr, 1e-3);
  EXPECT_EQ(d.min_lr, 1e-4);
  EXPECT_EQ(d.muon_lr, 0.002);
  EXPECT_EQ(d.weight_decay, 0.01);
  EXPECT_EQ(d.adam_beta1, 0.9);
  EXPECT_EQ(d.adam_beta2, 0.999);
  EXPECT_EQ(d.adam_eps, 1e-8);
  EXPECT_EQ(d.muon_momentum, 0.95);
  EXPECT_TRUE(d.muon_nesterov);
  EXPECT_EQ(d.muon_ns_steps, 5);
  EXPECT_EQ(d.muon_coefficient_set, MuonCoefficientSet::kQuintic);
  EXPECT_EQ(d.muon_ns_algorithm, NsAlgorithm::kStandard);
  EXPECT_EQ(d.muon_scale_mode, MuonScaleMode::kSpectral);
  EXPECT_EQ(d.muon_extra_scale_factor, 1.0);
  EXPECT_TRUE(d.muon_split_qkv);
  EXPECT_EQ(d.muon_matmul_precision, MatmulPrecision::kFp32);
  EXPECT_EQ(d.clip_grad, 1.0);
  EXPECT_FALSE(d.overlap_param_gather_with_optimizer_step);
}

TEST(OptimizerSpec, HyperparameterChecksStartFromTheSpecDefaults) {
  const OptimizerHyperparameters fresh;
  const OptimizerHyperparameters of_spec = hyperparameters_of(kDefaultOptimizerConfig);
  EXPECT_EQ(fresh.lr, of_spec.lr);
  EXPECT_EQ(fresh.muon_lr, of_spec.muon_lr);
  EXPECT_EQ(fresh.weight_decay, of_spec.weight_decay);
  EXPECT_EQ(fresh.beta1, of_spec.beta1);
  EXPECT_EQ(fresh.beta2, of_spec.beta2);
  EXPECT_EQ(fresh.eps, of_spec.eps);
  EXPECT_EQ(fresh.momentum, of_spec.momentum);
  EXPECT_EQ(fresh.ns_steps, of_spec.ns_steps);
  EXPECT_EQ(fresh.extra_scale_factor, of_spec.extra_scale_factor);
  EXPECT_EQ(fresh.clip_grad, of_spec.clip_grad);
}

// Every name of every table is selectable from YAML (the scale mode has four).
TEST(OptimizerSpec, EveryNameOfEveryTableParsesFromYaml) {
  EXPECT_EQ(std::size(kMuonScaleModeNames), 4u);
  for (const auto& [mode, name] : kMuonScaleModeNames) {
    const auto cfg = parse_training_config(str_cat("optimizer: {muon_scale_mode: ", name, "}"));
    EXPECT_EQ(cfg.optimizer.muon_scale_mode, mode) << name;
  }
  EXPECT_EQ(parse_training_config("optimizer: {muon_scale_mode: adamw_matched_rms}")
                .optimizer.muon_scale_mode,
            MuonScaleMode::kAdamwMatchedRms);
  for (const auto& [set, name] : kMuonCoefficientSetNames) {
    const auto cfg =
        parse_training_config(str_cat("optimizer: {muon_coefficient_set: ", name, "}"));
    EXPECT_EQ(cfg.optimizer.muon_coefficient_set, set) << name;
  }
  for (const auto& [algorithm, name] : kNsAlgorithmNames) {
    const auto cfg = parse_training_config(str_cat("optimizer: {muon_ns_algorithm: ", name, "}"));
    EXPECT_EQ(cfg.optimizer.muon_ns_algorithm, algorithm) << name;
  }
  for (const auto& [precision, name] : kMatmulPrecisionNames) {
    const auto cfg =
        parse_training_config(str_cat("optimizer: {muon_matmul_precision: ", name, "}"));
    EXPECT_EQ(cfg.optimizer.muon_matmul_precision, precision) << name;
  }
  for (const auto& [kind, name] : kOptimizerKindNames) {
    const auto cfg = parse_training_config(str_cat("optimizer: {kind: ", name, "}"));
    EXPECT_EQ(cfg.optimizer.kind, kind) << name;
    EXPECT_EQ(cfg.optimizer.use_distributed_optimizer(), is_distributed_optimizer(kind));
  }
}

TEST(OptimizerSpec, OnlyLayerWiseAndDistributedAreDistributed) {
  EXPECT_TRUE(is_distributed_optimizer(OptimizerKind::kLayerWise));
  EXPECT_TRUE(is_distributed_optimizer(OptimizerKind::kDistributed));
  EXPECT_FALSE(is_distributed_optimizer(OptimizerKind::kDdp));
  EXPECT_FALSE(is_distributed_optimizer(OptimizerKind::kLegacyLayerWise));
  // The legacy path all-reduces grads but still shards the optimizer state by owner.
  EXPECT_TRUE(shards_optimizer_state(OptimizerKind::kLegacyLayerWise));
  EXPECT_TRUE(shards_optimizer_state(OptimizerKind::kLayerWise));
  EXPECT_TRUE(shards_optimizer_state(OptimizerKind::kDistributed));
  EXPECT_FALSE(shards_optimizer_state(OptimizerKind::kDdp));
}

}  // namespace
}  // namespace shardwise
