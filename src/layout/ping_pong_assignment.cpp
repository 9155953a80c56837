// Legacy shard assignment of the layer-wise optimizer when no layout exists.
#include <algorithm>

#include "shardwise/core/error.hpp"
#include "shardwise/layout/layout_algorithms.hpp"

namespace shardwise {

std::vector<std::vector<ParamId>> ping_pong_shard_assignment(const ParamList& params,
                                                             const std::vector<ParamId>& ids,
                                                             int num_ranks) {
  SW_REQUIRE(num_ranks >= 1, InvalidArgument, "ping-pong assignment: num_ranks must be >= 1, got ",
             num_ranks);
  for (ParamId id : ids) {
    SW_REQUIRE(id < params.size(), InvalidArgument, "ping-pong assignment: param id ", id,
               " out of range (model has ", params.size(), " params)");
  }
  std::vector<ParamId> sorted = ids;
  std::stable_sort(sorted.begin(), sorted.end(),
                   [&](ParamId a, ParamId b) { return params[a].numel() < params[b].numel(); });
  std::vector<std::vector<ParamId>> per_rank(static_cast<std::size_t>(num_ranks));
  const std::size_t n = static_cast<std::size_t>(num_ranks);
  for (std::size_t i = 0; i < sorted.size(); ++i) {
    // Ranks 0..n-1, then n-1..0, repeating: small and large params alternate per rank.
    const std::size_t phase = i % (2 * n);
    const std::size_t rank = phase < n ? phase : 2 * n - 1 - phase;
    per_rank[rank].push_back(sorted[i]);
  }
  return per_rank;
}

}  // namespace shardwise
