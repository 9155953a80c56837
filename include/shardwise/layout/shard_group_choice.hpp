// `auto` layer-wise shard group size: lays the model out for every divisor S of dp and picks by
// the per-rank cost of the layout actually computed (see layout_cost.hpp).
//
// Rule: the smallest per-rank memory (param + grad buffers + optimizer state, padding included)
// wins; among candidates whose memory is within kShardGroupMemoryTolerance of that minimum, the
// one communicating the fewest bytes per rank per step, then the largest S (fewest replica
// groups, so the fewest all-reduce hops). Exposed reduce-scatter bytes (the last buckets', which
// cannot overlap with backward) can overrule that pick: a candidate whose memory is within
// kShardGroupOverlapMemoryTolerance of the minimum and whose exposed bytes are at most half the
// pick's is taken instead (the least exposed such, then the least comm). On llama3-70b at dp 64
// that is S = 16 over S = 64: 5.0x fewer exposed bytes, 0% padding, 4% more memory.
#pragma once

#include <string>
#include <vector>

#include "shardwise/layout/layout_cost.hpp"
#include "shardwise/layout/layout_options.hpp"
#include "shardwise/layout/param_info.hpp"

namespace shardwise {

inline constexpr double kShardGroupMemoryTolerance = 0.01;
inline constexpr double kShardGroupOverlapMemoryTolerance = 0.05;

struct ShardGroupCandidate {
  int shard_group_size = 1;
  double padding_fraction = 0.0;
  std::int64_t param_grad_bytes = 0;       // per rank
  std::int64_t optimizer_state_bytes = 0;  // per rank
  std::int64_t comm_bytes = 0;             // per rank per step
  std::int64_t exposed_rs_bytes = 0;       // per rank per step, the last buckets' reduce-scatter
  std::int64_t memory_bytes() const { return param_grad_bytes + optimizer_state_bytes; }
};

struct ShardGroupChoice {
  int shard_group_size = 1;                // the chosen S
  std::vector<ShardGroupCandidate> table;  // every divisor of dp, ascending
};

// Candidate from an already computed layout's cost.
ShardGroupCandidate shard_group_candidate(int shard_group_size, const LayoutCost& cost);

// Computes the full layout for every divisor S of options.data_parallel_size (the options'
// own layer_wise_shard_group_size is ignored) and applies the rule above. With a non-layer-wise
// algorithm S does not matter and the answer is dp.
ShardGroupChoice choose_shard_group_size(const ParamList& params, const LayoutOptions& options);

// The rule above applied to a table (non-empty); separated for tests.
int pick_shard_group_size(const std::vector<ShardGroupCandidate>& table);

// Fixed-width table, one row per candidate, the chosen one marked with '*'.
std::string render_shard_group_table(const ShardGroupChoice& choice);

}  // namespace shardwise
