#include "shardwise/layout/baseline_layouts.hpp"

#include <algorithm>
#include <numeric>

#include "layout_input.hpp"
#include "shardwise/layout/padding.hpp"

namespace shardwise {
namespace {

using layout_detail::BackpropParam;

// Megatron-LM extends a chunk past bucket_size while one param dominates it, so that the chunk's
// numel approaches the dp * largest-param size its bucket will have anyway.
constexpr double kPaddingFloor = 0.9;

// Packs backprop positions `chunk` into dp shards and appends the bucket to `layout`.
// A shared embedding goes alone into shard 0, the other shards padded to its size. Otherwise LPT
// by numel: largest first (stable, so ties keep backprop order) onto the first least-loaded shard.
// Inside a shard params sit in the order they were assigned (largest first), as in Megatron-LM.
void emit_bucket(const std::vector<BackpropParam>& order, const std::vector<std::size_t>& chunk,
                 bool shared_embedding, std::int64_t shard_divisor, PerBufferParamLayout& layout) {
  if (chunk.empty()) return;
  const auto dp = static_cast<std::size_t>(layout.num_shards);
  std::vector<std::vector<std::size_t>> shards(dp);
  std::vector<std::int64_t> cursors(dp, 0);
  if (shared_embedding) {
    shards[0].push_back(chunk[0]);
    std::fill(cursors.begin(), cursors.end(), order[chunk[0]].numel);
  } else {
    std::vector<std::size_t> by_size = chunk;
    std::stable_sort(by_size.begin(), by_size.end(),
                     [&](std::size_t a, std::size_t b) { return order[a].numel > order[b].numel; });
    for (const std::size_t pos : by_size) {
      const auto least = static_cast<std::size_t>(std::min_element(cursors.begin(), cursors.end()) -
                                                  cursors.begin());
      shards[least].push_back(pos);
      cursors[least] = pad_param_start(cursors[least]) + order[pos].numel;
    }
  }
  // A bucket of empty params still needs a non-empty shard to have an owner.
  const std::int64_t largest =
      std::max<std::int64_t>(*std::max_element(cursors.begin(), cursors.end()), 1);
  const std::int64_t shard_size = pad_to_divisor(largest, shard_divisor);
  const std::int64_t bucket_start = layout.numel();
  const int bucket_id = static_cast<int>(layout.bucket_indices.size());
  std::int64_t unpadded = 0;
  for (std::size_t s = 0; s < dp; ++s) {
    std::int64_t cursor = bucket_start + static_cast<std::int64_t>(s) * shard_size;
    for (const std::size_t pos : shards[s]) {
      cursor = pad_param_start(cursor);
      layout.param_index_map[pos] = {order[pos].id, cursor, cursor + order[pos].numel, bucket_id};
      layout.param_indices[pos] = order[pos].param_index;
      cursor += order[pos].numel;
      unpadded += order[pos].numel;
    }
  }
  layout.bucket_indices.push_back(
      {bucket_start, bucket_start + static_cast<std::int64_t>(dp) * shard_size});
  layout.per_bucket_numel_unpadded.push_back(unpadded);
}

}  // namespace

PerBufferParamLayout compute_lpt_floor_layer_wise_layout(const BufferLayoutInput& input) {
  const auto order = layout_detail::backprop_params(input, "megatron layer-wise");
  const int dp = input.data_parallel_size;
  const std::int64_t shard_divisor = layer_wise_shard_divisor(dp, input.pad_for_high_nccl_busbw);
  PerBufferParamLayout layout;
  layout.num_shards = dp;
  layout.shard_aligned = true;
  layout.param_index_map.resize(order.size());
  layout.param_indices.resize(order.size());

  std::vector<std::size_t> chunk;
  std::int64_t chunk_numel = 0;
  std::int64_t chunk_max = 0;
  auto finalise = [&] {
    emit_bucket(order, chunk, false, shard_divisor, layout);
    chunk.clear();
    chunk_numel = 0;
    chunk_max = 0;
  };
  for (std::size_t i = 0; i < order.size(); ++i) {
    if (order[i].shared_embedding) {
      finalise();
      emit_bucket(order, {i}, true, shard_divisor, layout);
      continue;
    }
    chunk.push_back(i);
    chunk_numel += order[i].numel;
    chunk_max = std::max(chunk_max, order[i].numel);
    if (!input.bucket_size) continue;
    // Python's int(dp * max * 0.9): a double product truncated toward zero.
    const auto floor_numel = static_cast<std::int64_t>(
        static_cast<double>(dp) * static_cast<double>(chunk_max) * kPaddingFloor);
    if (chunk_numel >= std::max(*input.bucket_size, floor_numel)) finalise();
  }
  finalise();
  return layout;
}

}  // namespace shardwise
