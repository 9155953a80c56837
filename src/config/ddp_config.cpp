#include "shardwise/config/ddp_config.hpp"

#include <algorithm>

#include "shardwise/core/error.hpp"

namespace shardwise {

std::optional<std::int64_t> DistributedDataParallelConfig::resolved_bucket_size(
    int data_parallel_size) const {
  if (bucket_size) return bucket_size;
  if (!overlap_grad_reduce) return std::nullopt;
  return std::max<std::int64_t>(40'000'000, std::int64_t{1'000'000} * data_parallel_size);
}

void DistributedDataParallelConfig::validate() const {
  if (bucket_size) {
    SW_REQUIRE(*bucket_size >= 1, ConfigError, "ddp.bucket_size must be >= 1 (got ", *bucket_size,
               ")");
  }
  SW_REQUIRE(num_buckets_per_group >= 1, ConfigError,
             "ddp.num_buckets_per_group must be >= 1 (got ", num_buckets_per_group, ")");
  SW_REQUIRE(!align_param_gather || overlap_param_gather, ConfigError,
             "ddp.align_param_gather needs ddp.overlap_param_gather");
  SW_REQUIRE(!overlap_param_gather || use_distributed_optimizer, ConfigError,
             "ddp.overlap_param_gather needs a distributed optimizer "
             "(ddp.use_distributed_optimizer; optimizer.kind layer-wise or distributed)");
  SW_REQUIRE(!(per_token_loss && average_in_collective), ConfigError,
             "ddp.per_token_loss and ddp.average_in_collective cannot both be set (the loss is "
             "already normalised by the token count)");
}

LayoutOptions DistributedDataParallelConfig::layout_options(
    LayoutAlgorithm algorithm, int data_parallel_size,
    std::optional<int> expert_data_parallel_size) const {
  LayoutOptions options;
  options.algorithm = algorithm;
  options.data_parallel_size = data_parallel_size;
  options.expert_data_parallel_size = expert_data_parallel_size;
  options.bucket_size = resolved_bucket_size(data_parallel_size);
  options.grad_reduce_in_fp32 = grad_reduce_in_fp32;
  options.pad_buckets_for_high_nccl_busbw = pad_buckets_for_high_nccl_busbw;
  return options;
}

}  // namespace shardwise
