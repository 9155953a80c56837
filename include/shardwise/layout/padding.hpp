// Padding and alignment rules shared by every layout algorithm (Megatron-Core's param_layout).
#pragma once

#include <cstdint>

namespace shardwise {

// Round value up to the nearest multiple of divisor (divisor > 0).
std::int64_t pad_to_divisor(std::int64_t value, std::int64_t divisor);

// Parameter starts are aligned to 64 elements.
inline constexpr std::int64_t kParamStartAlignment = 64;
std::int64_t pad_param_start(std::int64_t param_start_index);

// Bucket ends are divisible by lcm(dp, 128), or lcm(dp, 128, 2^16) when padding for high NCCL bus
// bandwidth.
std::int64_t bucket_end_divisor(int data_parallel_world_size, bool pad_for_high_nccl_busbw);
std::int64_t pad_bucket_end(std::int64_t bucket_end_index, int data_parallel_world_size,
                            bool pad_for_high_nccl_busbw);

// Per-shard alignment of the shard-aligned (layer-wise) layout: lcm(64, bucket_end_divisor / dp).
// dp * shard_size then satisfies the bucket-end rule and every shard start is 64-aligned.
std::int64_t layer_wise_shard_divisor(int data_parallel_world_size, bool pad_for_high_nccl_busbw);

}  // namespace shardwise
