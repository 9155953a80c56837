#include "shardwise/layout/padding.hpp"

#include <numeric>

#include "shardwise/core/error.hpp"

namespace shardwise {

std::int64_t pad_to_divisor(std::int64_t value, std::int64_t divisor) {
  SW_REQUIRE(divisor > 0, InvalidArgument, "pad_to_divisor: divisor must be > 0, got ", divisor);
  SW_REQUIRE(value >= 0, InvalidArgument, "pad_to_divisor: value must be >= 0, got ", value);
  return (value + divisor - 1) / divisor * divisor;
}

std::int64_t pad_param_start(std::int64_t param_start_index) {
  return pad_to_divisor(param_start_index, kParamStartAlignment);
}

std::int64_t bucket_end_divisor(int data_parallel_world_size, bool pad_for_high_nccl_busbw) {
  SW_REQUIRE(data_parallel_world_size >= 1, InvalidArgument,
             "data_parallel_size must be >= 1, got ", data_parallel_world_size);
  std::int64_t divisor =
      std::lcm(static_cast<std::int64_t>(data_parallel_world_size), std::int64_t{128});
  // 2^16-element multiples keep NCCL's reduce-scatter/all-gather at full bus bandwidth.
  if (pad_for_high_nccl_busbw) divisor = std::lcm(divisor, std::int64_t{65536});
  return divisor;
}

std::int64_t pad_bucket_end(std::int64_t bucket_end_index, int data_parallel_world_size,
                            bool pad_for_high_nccl_busbw) {
  return pad_to_divisor(bucket_end_index,
                        bucket_end_divisor(data_parallel_world_size, pad_for_high_nccl_busbw));
}

std::int64_t layer_wise_shard_divisor(int data_parallel_world_size, bool pad_for_high_nccl_busbw) {
  const std::int64_t per_shard =
      bucket_end_divisor(data_parallel_world_size, pad_for_high_nccl_busbw) /
      data_parallel_world_size;
  return std::lcm(kParamStartAlignment, per_shard);
}

}  // namespace shardwise
