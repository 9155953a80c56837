// Internal: turning planned shard-aligned buckets (a backprop range packed into dp bins, and the
// rank each bin goes to) into a PerBufferParamLayout, params in backprop order inside a shard.
#pragma once

#include <cstddef>
#include <vector>

#include "layout_input.hpp"
#include "shardwise/layout/shard_packing.hpp"

namespace shardwise::layout_detail {

struct PlannedBucket {
  std::size_t begin = 0;  // backprop positions [begin, end)
  std::size_t end = 0;
  ShardPacking packing;          // item i of the packing is backprop position begin + i
  std::vector<int> rank_of_bin;  // empty = bin b goes to rank b
};

// Bin b of a bucket becomes shard rank_of_bin[b]: [bucket_start + r*S, bucket_start + (r+1)*S),
// S = shard_units * 64. Inside a shard params follow backprop order, each start 64-aligned.
PerBufferParamLayout emit_shard_aligned_layout(const std::vector<BackpropParam>& order,
                                               const std::vector<PlannedBucket>& buckets,
                                               int num_shards);

// PackItems for backprop positions [begin, end).
std::vector<PackItem> pack_items(const std::vector<BackpropParam>& order, std::size_t begin,
                                 std::size_t end);

}  // namespace shardwise::layout_detail
