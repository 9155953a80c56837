// DistributedOptimizer layout (Megatron's ParamAndGradBuffer rules):
//  - params in backprop order, each start aligned to 64 elements;
//  - a bucket closes once its last param's end - bucket start >= bucket_size (alignment gaps
//    inside the bucket count towards it), and its end is padded with pad_bucket_end;
//  - a shared embedding closes the running bucket at the embedding's 64-aligned start and then
//    gets a bucket of its own.
// per_bucket_numel_unpadded is Megatron's count: the closing index minus the bucket start, i.e.
// the last param's end (alignment gaps between params included), or the embedding's aligned start
// when a shared embedding closed the bucket. Example: three params of 5000, bucket_size 8000,
// dp 2 -> [0,5000) [5056,10056) | [10112,15112): buckets (0,10112) (10112,15232), unpadded
// [10056, 5000].
// One deliberate difference from Megatron: its shared-embedding branch leaves the embedding at
// the aligned start even when the closed bucket's end gets padded past it (the embedding then
// overlaps the previous bucket's padding); here the embedding starts at the padded bucket end.
#include "layout_input.hpp"
#include "shardwise/layout/padding.hpp"

namespace shardwise {

PerBufferParamLayout compute_dist_opt_layout(const BufferLayoutInput& input) {
  const auto order = layout_detail::backprop_params(input, "distributed-optimizer");
  const int dp = input.data_parallel_size;
  const bool high_busbw = input.pad_for_high_nccl_busbw;
  PerBufferParamLayout layout;
  layout.num_shards = dp;
  std::int64_t bucket_start = 0;
  std::int64_t cursor = 0;  // next free element
  int bucket = 0;
  bool bucket_has_params = false;
  // Records the bucket ending (unpadded) at close_index; returns its padded end.
  auto close_bucket = [&](std::int64_t close_index) {
    const std::int64_t end = pad_bucket_end(close_index, dp, high_busbw);
    layout.bucket_indices.push_back({bucket_start, end});
    layout.per_bucket_numel_unpadded.push_back(close_index - bucket_start);
    bucket_start = end;
    bucket_has_params = false;
    ++bucket;
    return end;
  };
  for (const auto& p : order) {
    std::int64_t start = pad_param_start(cursor);
    if (p.shared_embedding && bucket_has_params) start = close_bucket(start);
    const std::int64_t end = start + p.numel;
    layout.param_index_map.push_back({p.id, start, end, bucket});
    layout.param_indices.push_back(p.param_index);
    bucket_has_params = true;
    if (p.shared_embedding || (input.bucket_size && end - bucket_start >= *input.bucket_size)) {
      cursor = close_bucket(end);
    } else {
      cursor = end;
    }
  }
  if (bucket_has_params) close_bucket(cursor);
  return layout;
}

}  // namespace shardwise
