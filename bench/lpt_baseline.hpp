// Baselines shared by the layout benchmarks: a straightforward LPT-by-numel shard-aligned layout
// (backprop-order chunks of >= bucket_size elements, each packed largest-numel-first onto the
// least-loaded shard, every shard padded to the largest one), and a helper that swaps it (or any
// other per-buffer algorithm) in for the layer-wise buffers of a full layout.
#pragma once

#include <algorithm>
#include <functional>
#include <limits>

#include "shardwise/layout/buffer_grouping.hpp"
#include "shardwise/layout/layout_algorithms.hpp"
#include "shardwise/layout/padding.hpp"

namespace shardwise::bench {

// The LPT-by-numel baseline for one buffer (see the file comment).
inline PerBufferParamLayout lpt_layout(const BufferLayoutInput& input) {
  const ParamList& params = *input.params;
  const int dp = input.data_parallel_size;
  const std::int64_t divisor = layer_wise_shard_divisor(dp, input.pad_for_high_nccl_busbw);
  const std::int64_t bucket_size =
      input.bucket_size.value_or(std::numeric_limits<std::int64_t>::max());

  // Backprop order; shared embeddings get a chunk of their own.
  std::vector<std::vector<ParamId>> chunks;
  std::vector<ParamId> current;
  std::int64_t current_numel = 0;
  auto close = [&] {
    if (!current.empty()) chunks.push_back(std::move(current));
    current.clear();
    current_numel = 0;
  };
  for (auto it = input.buffer_params.rbegin(); it != input.buffer_params.rend(); ++it) {
    if (params[*it].shared_embedding) {
      close();
      current.push_back(*it);
      close();
      continue;
    }
    current.push_back(*it);
    current_numel += params[*it].numel();
    if (current_numel >= bucket_size) close();
  }
  close();

  PerBufferParamLayout layout;
  layout.num_shards = dp;
  layout.shard_aligned = true;
  std::int64_t offset = 0;
  for (std::size_t b = 0; b < chunks.size(); ++b) {
    std::vector<ParamId> order = chunks[b];
    std::stable_sort(order.begin(), order.end(),
                     [&](ParamId x, ParamId y) { return params[x].numel() > params[y].numel(); });
    std::vector<std::int64_t> loads(static_cast<std::size_t>(dp), 0);
    std::vector<std::vector<ParamId>> shards(static_cast<std::size_t>(dp));
    std::int64_t unpadded = 0;
    for (const ParamId id : order) {
      const auto least =
          static_cast<std::size_t>(std::min_element(loads.begin(), loads.end()) - loads.begin());
      shards[least].push_back(id);
      loads[least] += pad_param_start(std::max<std::int64_t>(params[id].numel(), 1));
      unpadded += params[id].numel();
    }
    const std::int64_t shard_size = pad_to_divisor(
        std::max<std::int64_t>(*std::max_element(loads.begin(), loads.end()), 1), divisor);
    for (int s = 0; s < dp; ++s) {
      std::int64_t cursor = offset + shard_size * s;
      for (const ParamId id : shards[static_cast<std::size_t>(s)]) {
        layout.param_index_map.push_back(
            ParamRange{id, cursor, cursor + params[id].numel(), static_cast<int>(b)});
        cursor += pad_param_start(std::max<std::int64_t>(params[id].numel(), 1));
      }
    }
    layout.bucket_indices.push_back(BucketRange{offset, offset + shard_size * dp});
    layout.per_bucket_numel_unpadded.push_back(unpadded);
    offset += shard_size * dp;
  }
  std::sort(layout.param_index_map.begin(), layout.param_index_map.end(),
            [](const ParamRange& x, const ParamRange& y) { return x.start < y.start; });
  return layout;
}

using BufferAlgorithm = std::function<PerBufferParamLayout(const BufferLayoutInput&)>;

// Our full layout with every shard-aligned (layer-wise) buffer recomputed by `algorithm`.
inline FullParamLayout with_layer_wise_buffers(const ParamList& params,
                                               const LayoutOptions& options,
                                               const FullParamLayout& ours,
                                               const BufferAlgorithm& algorithm) {
  FullParamLayout result = ours;
  const auto groups = group_params_for_buffers(params, options);
  for (const auto& [key, group] : groups) {
    if (!key.is_layer_wise) continue;
    BufferLayoutInput input;
    input.params = &params;
    input.buffer_params = group.params;
    input.param_indices = group.param_indices;
    input.bucket_size = options.bucket_size;
    input.data_parallel_size =
        key.is_expert_parallel ? options.expert_dp() : options.data_parallel_size;
    input.pad_for_high_nccl_busbw = options.pad_buckets_for_high_nccl_busbw;
    result.layouts[key] = algorithm(input);
  }
  return result;
}

}  // namespace shardwise::bench
