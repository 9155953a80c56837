#include "shardwise/config/ddp_config.hpp"

#include "shardwise/core/error.hpp"

namespace shardwise {

void validate_ddp_section(const DistributedDataParallelConfig& config) {
  if (config.bucket_size) {
    SW_REQUIRE(*config.bucket_size >= 1, ConfigError, "ddp.bucket_size must be >= 1 (got ",
               *config.bucket_size, ")");
  }
  SW_REQUIRE(config.num_buckets_per_group >= 1, ConfigError,
             "ddp.num_buckets_per_group must be >= 1 (got ", config.num_buckets_per_group, ")");
  SW_REQUIRE(!config.align_param_gather || config.overlap_param_gather, ConfigError,
             "ddp.align_param_gather needs ddp.overlap_param_gather");
  SW_REQUIRE(!(config.per_token_loss && config.average_in_collective), ConfigError,
             "ddp.per_token_loss and ddp.average_in_collective cannot both be set (the loss is "
             "already normalised by the token count)");
}

}  // namespace shardwise
