#include "shardwise/config/ddp_config.hpp"

#include <algorithm>
#include <cctype>
#include <string>

#include "shardwise/core/error.hpp"
#include "shardwise/core/message_text.hpp"

namespace shardwise {
namespace {

[[noreturn]] void bad_shard_group_size(std::string_view text) {
  throw ConfigError(
      str_cat("ddp.layer_wise_shard_group_size must be dp, auto or a positive integer (got '",
              printable(text), "')"));
}

// The shard group size as a number: nullopt for "dp" and "auto"; throws for a count below one.
std::optional<int> explicit_shard_group_size(const LayerWiseShardGroupSize& size) {
  if (size.kind != LayerWiseShardGroupSize::Kind::kRanks) return std::nullopt;
  if (size.ranks < 1) bad_shard_group_size(size.name());
  return size.ranks;
}

}  // namespace

LayerWiseShardGroupSize LayerWiseShardGroupSize::parse(std::string_view text) {
  if (text == "dp") return data_parallel();
  if (text == "auto") return automatic();
  const bool digits =
      !text.empty() && text.size() <= 9 &&
      std::all_of(text.begin(), text.end(), [](unsigned char c) { return std::isdigit(c) != 0; });
  if (!digits) bad_shard_group_size(text);
  const int ranks = std::stoi(std::string(text));
  if (ranks < 1) bad_shard_group_size(text);
  return of(ranks);
}

std::string LayerWiseShardGroupSize::name() const {
  switch (kind) {
    case Kind::kDataParallel:
      return "dp";
    case Kind::kAuto:
      return "auto";
    case Kind::kRanks:
      break;
  }
  return std::to_string(ranks);
}

std::optional<std::int64_t> DistributedDataParallelConfig::resolved_bucket_size(
    int data_parallel_size) const {
  if (bucket_size) return bucket_size;
  if (!overlap_grad_reduce) return std::nullopt;
  return default_bucket_size(data_parallel_size);
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
  SW_REQUIRE(!reproducible_reduction || grad_reduce_in_fp32, ConfigError,
             "ddp.reproducible_reduction needs ddp.grad_reduce_in_fp32 (it sums fp32 grads)");
  explicit_shard_group_size(layer_wise_shard_group_size);
}

void DistributedDataParallelConfig::validate_for_data_parallel_size(int data_parallel_size) const {
  const std::optional<int> s = explicit_shard_group_size(layer_wise_shard_group_size);
  SW_REQUIRE(!s || data_parallel_size % *s == 0, ConfigError, "ddp.layer_wise_shard_group_size ",
             *s, " does not divide the data-parallel size ", data_parallel_size);
}

std::optional<int> DistributedDataParallelConfig::explicit_layer_wise_shard_group_size() const {
  return explicit_shard_group_size(layer_wise_shard_group_size);
}

LayoutOptions DistributedDataParallelConfig::layout_options(
    LayoutAlgorithm algorithm, int data_parallel_size,
    std::optional<int> expert_data_parallel_size) const {
  validate_for_data_parallel_size(data_parallel_size);
  LayoutOptions options;
  options.algorithm = algorithm;
  options.data_parallel_size = data_parallel_size;
  options.expert_data_parallel_size = expert_data_parallel_size;
  options.bucket_size = resolved_bucket_size(data_parallel_size);
  options.grad_reduce_in_fp32 = grad_reduce_in_fp32;
  options.pad_buckets_for_high_nccl_busbw = pad_buckets_for_high_nccl_busbw;
  // S = dp is today's layout exactly (unset); "auto" is resolved by the caller, which has the
  // params (optim::wrap_with_ddp, via choose_shard_group_size).
  const std::optional<int> s = explicit_shard_group_size(layer_wise_shard_group_size);
  if (s && *s != data_parallel_size) options.layer_wise_shard_group_size = s;
  options.overlap_aware_cuts = layer_wise_cuts == LayerWiseCuts::kOverlapAware;
  return options;
}

}  // namespace shardwise
