#include "shardwise/config/optimizer_config.hpp"

#include <cmath>

#include "shardwise/core/error.hpp"

namespace shardwise {
namespace {

// The comparisons are written so that NaN fails them.
void require_at_least(double value, double low, const char* field) {
  SW_REQUIRE(value >= low, ConfigError, "optimizer.", field, " must be >= ", low, " (got ", value,
             ")");
}
void require_unit_interval(double value, const char* field) {
  SW_REQUIRE(value >= 0.0 && value < 1.0, ConfigError, "optimizer.", field,
             " must be in [0, 1) (got ", value, ")");
}

}  // namespace

void validate(const OptimizerConfig& config) {
  require_at_least(config.lr, 0.0, "lr");
  require_at_least(config.min_lr, 0.0, "min_lr");
  require_at_least(config.muon_lr, 0.0, "muon_lr");
  SW_REQUIRE(config.min_lr <= config.lr, ConfigError, "optimizer.min_lr (", config.min_lr,
             ") must be <= optimizer.lr (", config.lr, ")");
  require_at_least(config.weight_decay, 0.0, "weight_decay");
  require_unit_interval(config.adam_beta1, "adam_beta1");
  require_unit_interval(config.adam_beta2, "adam_beta2");
  SW_REQUIRE(config.adam_eps > 0.0, ConfigError, "optimizer.adam_eps must be > 0 (got ",
             config.adam_eps, ")");
  require_unit_interval(config.muon_momentum, "muon_momentum");
  SW_REQUIRE(config.muon_ns_steps >= 1, ConfigError, "optimizer.muon_ns_steps must be >= 1 (got ",
             config.muon_ns_steps, ")");
  SW_REQUIRE(config.muon_extra_scale_factor > 0.0 && std::isfinite(config.muon_extra_scale_factor),
             ConfigError, "optimizer.muon_extra_scale_factor must be > 0 (got ",
             config.muon_extra_scale_factor, ")");
  require_at_least(config.clip_grad, 0.0, "clip_grad");
  if (config.overlap_param_gather_with_optimizer_step) {
    SW_REQUIRE(config.use_distributed_optimizer(), ConfigError,
               "optimizer.overlap_param_gather_with_optimizer_step needs a distributed optimizer "
               "(kind layer-wise or distributed), not '",
               to_string(config.kind), "'");
  }
}

}  // namespace shardwise
