// Plain DDP layout: params back to back in backprop order, no padding anywhere. Its buffers are
// all-reduced whole, never split across ranks, so a bucket has one shard whatever dp is (naming
// dp shards here made the buffer demand buckets divisible by dp, which unpadded buckets rarely
// are).
#include "layout_input.hpp"

namespace shardwise {

PerBufferParamLayout compute_default_layout(const BufferLayoutInput& input) {
  const auto order = layout_detail::backprop_params(input, "default");
  PerBufferParamLayout layout;
  layout.num_shards = 1;
  std::int64_t bucket_start = 0;
  std::int64_t cursor = 0;
  int bucket = 0;
  auto close_bucket = [&] {
    layout.bucket_indices.push_back({bucket_start, cursor});
    layout.per_bucket_numel_unpadded.push_back(cursor - bucket_start);
    bucket_start = cursor;
    ++bucket;
  };
  for (const auto& p : order) {
    layout.param_index_map.push_back({p.id, cursor, cursor + p.numel, bucket});
    layout.param_indices.push_back(p.param_index);
    cursor += p.numel;
    if (input.bucket_size && cursor - bucket_start >= *input.bucket_size) close_bucket();
  }
  if (!layout.param_index_map.empty() && layout.param_index_map.back().bucket == bucket) {
    close_bucket();
  }
  return layout;
}

}  // namespace shardwise
