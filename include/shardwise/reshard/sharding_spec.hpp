// ShardingSpec: which N-d slices (boxes) of one parameter each rank holds. Ranks are global ranks
// of the group the reshard executor runs on. A rank may hold several boxes (block-interleaved
// tensor parallelism); several ranks may hold the same box (data-parallel replicas); a rank that
// holds nothing is simply absent.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "shardwise/reshard/box.hpp"

namespace shardwise {

struct ShardingSpec {
  std::vector<std::int64_t> global_shape;
  std::map<int, std::vector<Box>> boxes_by_rank;  // ordered by rank: deterministic iteration

  // The boxes `rank` holds, in spec order (empty when it holds none).
  const std::vector<Box>& boxes_of(int rank) const;
  std::vector<int> ranks() const;
  // Exact text form (used as the plan-cache key and in error messages).
  std::string serialize() const;
};

// Megatron-style placement of one parameter. Rank order: tensor-parallel fastest, then expert-
// parallel, then data-parallel, then pipeline stage (Megatron's default order; for expert weights
// tp is the expert-tensor-parallel size and dp the expert-data-parallel size):
//   rank = first_rank + t + tp * (e + ep * (d + dp * pp_stage))
// The parameter exists only on the ranks of its pipeline stage.
struct ParallelSharding {
  int tp = 1;             // tensor-parallel size
  int partition_dim = 0;  // dimension split by tensor parallelism (ignored when tp == 1)
  int stride = 1;         // block interleave: the dim is split into `stride` blocks and each TP
                          // rank holds its 1/tp of every block (fused QKV: 3, gated MLP: 2)
  int ep = 1;             // expert-parallel size
  int expert_dim = 0;     // dimension holding the experts, split into ep contiguous ranges
  int dp = 1;             // data-parallel replicas
  int pp = 1;             // pipeline stages
  int pp_stage = 0;       // the stage that owns this parameter
  int first_rank = 0;     // global rank of (t, e, d, stage) = (0, 0, 0, 0)
};

// Builds the spec of `shape` under `placement`. Throws InvalidArgument (naming `param`) when a
// split does not divide its dimension, a dimension index is out of range, or sizes are < 1.
ShardingSpec parallel_sharding(const std::string& param, const std::vector<std::int64_t>& shape,
                               const ParallelSharding& placement);

// Explicit form: rank -> boxes. Validates (naming `param`): ranks >= 0, each box has the shape's
// dimension count, lies inside the shape and is non-empty, and one rank's boxes are disjoint.
ShardingSpec explicit_sharding(const std::string& param, const std::vector<std::int64_t>& shape,
                               std::map<int, std::vector<Box>> boxes_by_rank);

// Re-runs the explicit_sharding checks on an existing spec.
void validate_sharding(const std::string& param, const ShardingSpec& spec);

// The pipeline stage owning layer `layer` of `num_layers` split evenly over `pp` stages (the
// first num_layers % pp stages take one extra layer).
int pipeline_stage_of_layer(int layer, int num_layers, int pp);

}  // namespace shardwise
