#include <cstdint>
#include <string>

#include "shardwise/core/fnv1a.hpp"
#include "shardwise/ddp/distributed_data_parallel.hpp"

namespace shardwise {

std::uint64_t layout_hash(const ParamList& params, const FullParamLayout& layout) {
  Fnv1a h;
  h.integer(static_cast<std::int64_t>(params.size()));
  h.integer(static_cast<std::int64_t>(layout.layouts.size()));
  for (const auto& [key, buffer] : layout.layouts) {
    h.integer(static_cast<std::int64_t>(key.param_dtype));
    h.integer(static_cast<std::int64_t>(key.grad_dtype));
    h.integer(key.is_expert_parallel ? 1 : 0);
    h.integer(key.is_layer_wise ? 1 : 0);
    h.integer(buffer.num_shards);
    h.integer(buffer.shard_aligned ? 1 : 0);
    h.integer(static_cast<std::int64_t>(buffer.bucket_indices.size()));
    for (const BucketRange& b : buffer.bucket_indices) {
      h.integer(b.start);
      h.integer(b.end);
    }
    for (std::int64_t n : buffer.per_bucket_numel_unpadded) h.integer(n);
    h.integer(static_cast<std::int64_t>(buffer.param_index_map.size()));
    for (const ParamRange& r : buffer.param_index_map) {
      h.integer(static_cast<std::int64_t>(r.param));
      h.integer(r.start);
      h.integer(r.end);
      h.integer(r.bucket);
      if (r.param < params.size()) {
        const ParamInfo& info = params[r.param];
        h.text(info.name);
        h.integer(static_cast<std::int64_t>(info.shape.size()));
        for (std::int64_t d : info.shape) h.integer(d);
        h.integer(static_cast<std::int64_t>(info.dtype));
      }
    }
  }
  return h.value();
}

}  // namespace shardwise
