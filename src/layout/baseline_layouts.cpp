#include "shardwise/layout/baseline_layouts.hpp"

#include "layout_input.hpp"
#include "shard_aligned_buckets.hpp"
#include "shardwise/layout/padding.hpp"

namespace shardwise {

PerBufferParamLayout compute_megatron_layer_wise_layout(const BufferLayoutInput& input) {
  using layout_detail::PlannedBucket;
  const auto order = layout_detail::backprop_params(input, "megatron layer-wise");
  const int dp = input.data_parallel_size;
  const std::int64_t divisor_units =
      layer_wise_shard_divisor(dp, input.pad_for_high_nccl_busbw) / kParamStartAlignment;
  std::vector<PlannedBucket> buckets;
  std::size_t chunk_begin = 0;
  std::int64_t chunk_numel = 0;
  auto finalise = [&](std::size_t end) {
    if (end == chunk_begin) return;
    PlannedBucket bucket;
    bucket.begin = chunk_begin;
    bucket.end = end;
    bucket.packing = pack_capped_greedy_by_ns(layout_detail::pack_items(order, chunk_begin, end),
                                              dp, divisor_units);
    buckets.push_back(std::move(bucket));
    chunk_begin = end;
    chunk_numel = 0;
  };
  for (std::size_t i = 0; i < order.size(); ++i) {
    if (order[i].shared_embedding) {
      finalise(i);
      finalise(i + 1);
      continue;
    }
    chunk_numel += order[i].numel;
    if (input.bucket_size && chunk_numel >= *input.bucket_size) finalise(i + 1);
  }
  finalise(order.size());
  return layout_detail::emit_shard_aligned_layout(order, buckets, dp);
}

}  // namespace shardwise
