#include "shard_aligned_buckets.hpp"

#include "shardwise/core/error.hpp"
#include "shardwise/layout/padding.hpp"

namespace shardwise::layout_detail {

std::vector<PackItem> pack_items(const std::vector<BackpropParam>& order, std::size_t begin,
                                 std::size_t end) {
  std::vector<PackItem> items;
  items.reserve(end - begin);
  for (std::size_t i = begin; i < end; ++i) {
    items.push_back({param_units(order[i].numel), order[i].ns_cost});
  }
  return items;
}

PerBufferParamLayout emit_shard_aligned_layout(const std::vector<BackpropParam>& order,
                                               const std::vector<PlannedBucket>& buckets,
                                               int num_shards) {
  PerBufferParamLayout layout;
  layout.num_shards = num_shards;
  layout.shard_aligned = true;
  layout.param_index_map.resize(order.size());
  layout.param_indices.resize(order.size());
  std::int64_t bucket_start = 0;
  std::size_t expected_begin = 0;
  for (std::size_t b = 0; b < buckets.size(); ++b) {
    const PlannedBucket& bucket = buckets[b];
    SW_CHECK(bucket.begin == expected_begin && bucket.end > bucket.begin, "planned bucket ", b,
             " does not continue the backprop order");
    expected_begin = bucket.end;
    const std::int64_t shard = bucket.packing.shard_units * kParamStartAlignment;
    std::int64_t unpadded = 0;
    SW_CHECK(bucket.packing.bins.size() == static_cast<std::size_t>(num_shards), "bucket ", b,
             " packed into ", bucket.packing.bins.size(), " bins, expected ", num_shards);
    for (std::size_t bin = 0; bin < bucket.packing.bins.size(); ++bin) {
      const int rank = bucket.rank_of_bin.empty() ? static_cast<int>(bin) : bucket.rank_of_bin[bin];
      const std::int64_t shard_start = bucket_start + rank * shard;
      std::int64_t cursor = shard_start;
      for (std::size_t item : bucket.packing.bins[bin]) {
        const BackpropParam& p = order[bucket.begin + item];
        const std::int64_t start = pad_param_start(cursor);
        layout.param_index_map[bucket.begin + item] = {p.id, start, start + p.numel,
                                                       static_cast<int>(b)};
        layout.param_indices[bucket.begin + item] = p.param_index;
        cursor = start + param_units(p.numel) * kParamStartAlignment;
        unpadded += p.numel;
      }
      SW_CHECK(cursor <= shard_start + shard, "bin ", bin, " of bucket ", b,
               " overflows its shard");
    }
    layout.bucket_indices.push_back({bucket_start, bucket_start + shard * num_shards});
    layout.per_bucket_numel_unpadded.push_back(unpadded);
    bucket_start += shard * num_shards;
  }
  SW_CHECK(expected_begin == order.size(), "planned buckets cover ", expected_begin, " of ",
           order.size(), " params");
  return layout;
}

}  // namespace shardwise::layout_detail
