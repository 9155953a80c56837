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
  std::vector<std::int64_t> cursor;
  for (std::size_t b = 0; b < buckets.size(); ++b) {
    const PlannedBucket& bucket = buckets[b];
    SW_CHECK(bucket.begin == expected_begin && bucket.end > bucket.begin, "planned bucket ", b,
             " does not continue the backprop order");
    expected_begin = bucket.end;
    const std::int64_t shard = bucket.packing.shard_units * kParamStartAlignment;
    std::int64_t unpadded = 0;
    const ShardPacking& packing = bucket.packing;
    SW_CHECK(packing.num_bins() == num_shards, "bucket ", b, " packed into ", packing.num_bins(),
             " bins, expected ", num_shards);
    SW_CHECK(packing.bin_of.size() == bucket.end - bucket.begin, "bucket ", b, " packs ",
             packing.bin_of.size(), " of its ", bucket.end - bucket.begin, " params");
    // Next free element of each bin's shard; params are placed in backprop order.
    cursor.resize(static_cast<std::size_t>(num_shards));
    for (std::size_t bin = 0; bin < cursor.size(); ++bin) {
      const int rank = bucket.rank_of_bin.empty() ? static_cast<int>(bin) : bucket.rank_of_bin[bin];
      cursor[bin] = bucket_start + rank * shard;
    }
    for (std::size_t item = 0; item < packing.bin_of.size(); ++item) {
      const auto bin = static_cast<std::size_t>(packing.bin_of[item]);
      const BackpropParam& p = order[bucket.begin + item];
      const std::int64_t start = pad_param_start(cursor[bin]);
      layout.param_index_map[bucket.begin + item] = {p.id, start, start + p.numel,
                                                     static_cast<int>(b)};
      layout.param_indices[bucket.begin + item] = p.param_index;
      cursor[bin] = start + param_units(p.numel) * kParamStartAlignment;
      unpadded += p.numel;
      const int rank = bucket.rank_of_bin.empty() ? static_cast<int>(bin) : bucket.rank_of_bin[bin];
      SW_CHECK(cursor[bin] <= bucket_start + (rank + 1) * shard, "bin ", bin, " of bucket ", b,
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
