#include "shardwise/layout/layout_stats.hpp"

#include <algorithm>

#include "shardwise/core/error.hpp"

namespace shardwise {
namespace {

// Accumulates one buffer's per-shard load; shard s of a buffer with n shards is worked on by every
// rank r with r % n == s (an expert buffer over expert-dp < dp ranks is held by each expert-DP
// group; a buffer with one shard, as in plain DDP, is updated in full by every rank).
struct ShardLoads {
  std::vector<std::int64_t> numel;
  std::vector<double> cost;

  explicit ShardLoads(int num_shards)
      : numel(static_cast<std::size_t>(num_shards), 0),
        cost(static_cast<std::size_t>(num_shards)) {}
};

void charge_shard_aligned(const ParamList& params, const PerBufferParamLayout& buffer,
                          ShardLoads& loads) {
  for (const ParamRange& range : buffer.param_index_map) {
    const int shard = buffer.owner_shard(range);
    loads.numel[static_cast<std::size_t>(shard)] += range.numel();
    loads.cost[static_cast<std::size_t>(shard)] += newton_schulz_cost(params.at(range.param));
  }
}

// Element-sharded: shard s of bucket b is [start + numel*s/n, start + numel*(s+1)/n); each rank
// updates the real (non-padding) elements of its slice elementwise.
void charge_element_sharded(const PerBufferParamLayout& buffer, ShardLoads& loads) {
  const std::int64_t n = buffer.num_shards;
  for (const ParamRange& range : buffer.param_index_map) {
    if (range.numel() == 0) continue;
    SW_CHECK(
        range.bucket >= 0 && static_cast<std::size_t>(range.bucket) < buffer.bucket_indices.size(),
        "param ", range.param, " has bucket id ", range.bucket, " out of range");
    const BucketRange& bucket = buffer.bucket_indices[static_cast<std::size_t>(range.bucket)];
    SW_CHECK(range.start >= bucket.start && range.end <= bucket.end, "param ", range.param, " [",
             range.start, ", ", range.end, ") lies outside its bucket [", bucket.start, ", ",
             bucket.end, ")");
    auto slice_start = [&](std::int64_t s) { return bucket.start + bucket.numel() * s / n; };
    // First shard whose slice contains range.start (slices are monotone in s).
    std::int64_t s = (range.start - bucket.start) * n / std::max<std::int64_t>(bucket.numel(), 1);
    while (s > 0 && slice_start(s) > range.start) --s;
    while (s + 1 < n && slice_start(s + 1) <= range.start) ++s;
    for (; s < n && slice_start(s) < range.end; ++s) {
      const std::int64_t lo = std::max(range.start, slice_start(s));
      const std::int64_t hi = std::min(range.end, slice_start(s + 1));
      if (hi <= lo) continue;
      loads.numel[static_cast<std::size_t>(s)] += hi - lo;
      loads.cost[static_cast<std::size_t>(s)] += static_cast<double>(hi - lo);
    }
  }
}

}  // namespace

LayoutStats compute_layout_stats(const ParamList& params, const FullParamLayout& layout,
                                 const LayoutOptions& options) {
  int num_ranks = std::max(options.data_parallel_size, options.expert_dp());
  for (const auto& [key, buffer] : layout.layouts)
    num_ranks = std::max(num_ranks, buffer.num_shards);
  SW_CHECK(num_ranks >= 1, "layout stats need at least one rank");

  LayoutStats stats;
  stats.ranks.resize(static_cast<std::size_t>(num_ranks));
  for (int r = 0; r < num_ranks; ++r) stats.ranks[static_cast<std::size_t>(r)].rank = r;

  for (const auto& [key, buffer] : layout.layouts) {
    SW_CHECK(buffer.num_shards >= 1, "buffer ", key.to_string(), " has ", buffer.num_shards,
             " shards");
    stats.numel_padded += buffer.numel();
    for (const ParamRange& range : buffer.param_index_map) stats.numel_unpadded += range.numel();

    ShardLoads loads(buffer.num_shards);
    if (buffer.shard_aligned) {
      charge_shard_aligned(params, buffer, loads);
    } else {
      charge_element_sharded(buffer, loads);
    }
    for (int r = 0; r < num_ranks; ++r) {
      const auto s = static_cast<std::size_t>(r % buffer.num_shards);
      stats.ranks[static_cast<std::size_t>(r)].numel += loads.numel[s];
      stats.ranks[static_cast<std::size_t>(r)].ns_cost += loads.cost[s];
    }
  }

  stats.padding_fraction = stats.numel_padded > 0
                               ? 1.0 - static_cast<double>(stats.numel_unpadded) /
                                           static_cast<double>(stats.numel_padded)
                               : 0.0;
  double max_cost = 0.0;
  double total_cost = 0.0;
  for (const RankLoad& rank : stats.ranks) {
    max_cost = std::max(max_cost, rank.ns_cost);
    total_cost += rank.ns_cost;
  }
  const double mean_cost = total_cost / num_ranks;
  stats.ns_cost_max_over_mean = mean_cost > 0.0 ? max_cost / mean_cost : 1.0;
  return stats;
}

}  // namespace shardwise
