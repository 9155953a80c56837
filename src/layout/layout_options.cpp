#include "shardwise/layout/layout_options.hpp"

#include <numeric>

#include "shardwise/core/checked_size.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise {

void LayoutOptions::validate() const {
  // Above kMaxParallelSize a size is a typo: the layout's work and memory grow with it.
  SW_REQUIRE(data_parallel_size >= 1 && data_parallel_size <= kMaxParallelSize, InvalidArgument,
             "layout options: data_parallel_size must be in [1, ", kMaxParallelSize, "], got ",
             data_parallel_size);
  SW_REQUIRE(!expert_data_parallel_size || (*expert_data_parallel_size >= 1 &&
                                            *expert_data_parallel_size <= kMaxParallelSize),
             InvalidArgument, "layout options: expert_data_parallel_size must be in [1, ",
             kMaxParallelSize, "], got ", expert_data_parallel_size.value_or(0));
  SW_REQUIRE(!bucket_size || *bucket_size >= 1, InvalidArgument,
             "layout options: bucket_size must be >= 1 (or unset for one bucket), got ",
             bucket_size.value_or(0));
  if (layer_wise_shard_group_size) {
    const int s = *layer_wise_shard_group_size;
    SW_REQUIRE(s >= 1 && data_parallel_size % s == 0, InvalidArgument,
               "layout options: layer_wise_shard_group_size ", s,
               " must be >= 1 and divide data_parallel_size ", data_parallel_size);
  }
}

int LayoutOptions::num_shards_for(bool layer_wise, int group_dp) const {
  // S = dp is the single-group layout for every buffer, also for an expert DP size that does not
  // divide dp.
  if (!layer_wise || !layer_wise_shard_group_size ||
      *layer_wise_shard_group_size == data_parallel_size) {
    return group_dp;
  }
  return std::gcd(*layer_wise_shard_group_size, group_dp);
}

}  // namespace shardwise
