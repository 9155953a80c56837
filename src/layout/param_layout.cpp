#include "shardwise/layout/param_layout.hpp"

#include <algorithm>

#include "shardwise/core/error.hpp"

namespace shardwise {

std::string BufferKey::to_string() const {
  return str_cat("{param=", dtype_name(param_dtype), ", grad=", dtype_name(grad_dtype),
                 is_expert_parallel ? ", expert" : ", dense",
                 is_layer_wise ? ", layer-wise}" : "}");
}

std::int64_t PerBufferParamLayout::numel_unpadded() const {
  std::int64_t total = 0;
  for (std::int64_t n : per_bucket_numel_unpadded) total += n;
  return total;
}

const ParamRange* PerBufferParamLayout::find(ParamId param) const {
  // param_index_map is in backprop order, i.e. ParamIds strictly decreasing (validate_layout
  // enforces it), so a binary search suffices.
  auto it = std::lower_bound(param_index_map.begin(), param_index_map.end(), param,
                             [](const ParamRange& range, ParamId id) { return range.param > id; });
  if (it == param_index_map.end() || it->param != param) return nullptr;
  return &*it;
}

std::int64_t PerBufferParamLayout::shard_size(int bucket) const {
  SW_CHECK(bucket >= 0 && static_cast<std::size_t>(bucket) < bucket_indices.size(), "bucket ",
           bucket, " out of range (", bucket_indices.size(), " buckets)");
  SW_CHECK(num_shards >= 1, "num_shards is ", num_shards);
  const BucketRange& b = bucket_indices[static_cast<std::size_t>(bucket)];
  SW_CHECK(b.numel() % num_shards == 0, "bucket ", bucket, " numel ", b.numel(),
           " not divisible by ", num_shards, " shards");
  return b.numel() / num_shards;
}

int PerBufferParamLayout::owner_shard(const ParamRange& range) const {
  const std::int64_t size = shard_size(range.bucket);
  const BucketRange& b = bucket_indices[static_cast<std::size_t>(range.bucket)];
  SW_CHECK(range.start >= b.start && range.end <= b.end, "param ", range.param,
           " lies outside its bucket ", range.bucket);
  SW_CHECK(size > 0, "bucket ", range.bucket, " is empty");
  const std::int64_t first = (range.start - b.start) / size;
  const std::int64_t last = range.numel() > 0 ? (range.end - 1 - b.start) / size : first;
  SW_CHECK(first == last, "param ", range.param, " [", range.start, ", ", range.end,
           ") straddles shards ", first, " and ", last, " of bucket ", range.bucket);
  return static_cast<int>(first);
}

std::optional<std::pair<BufferKey, ParamRange>> FullParamLayout::find(ParamId param) const {
  for (const auto& [key, layout] : layouts) {
    if (const ParamRange* range = layout.find(param)) return std::make_pair(key, *range);
  }
  return std::nullopt;
}

}  // namespace shardwise
