// Quality figures of a layout: padding and per-rank load (numel, Newton–Schulz cost).
#pragma once

#include <cstdint>
#include <vector>

#include "shardwise/layout/layout_options.hpp"
#include "shardwise/layout/param_info.hpp"
#include "shardwise/layout/param_layout.hpp"

namespace shardwise {

struct RankLoad {
  int rank = 0;
  std::int64_t numel = 0;  // elements of real params this rank updates
  double ns_cost = 0.0;    // Newton–Schulz (or elementwise) work this rank does per step
};

struct LayoutStats {
  std::int64_t numel_unpadded = 0;
  std::int64_t numel_padded = 0;
  double padding_fraction = 0.0;       // 1 - unpadded / padded
  double ns_cost_max_over_mean = 1.0;  // over ranks; 1.0 is perfect balance
  std::vector<RankLoad> ranks;         // one per data-parallel rank (max of dp, expert dp)
};

// Shard-aligned buffers charge each param's full cost to its owning shard; element-sharded
// buffers charge each rank the elements of its 1/dp slice of every bucket.
LayoutStats compute_layout_stats(const ParamList& params, const FullParamLayout& layout,
                                 const LayoutOptions& options);

}  // namespace shardwise
