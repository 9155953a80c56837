// Layer-wise shard groups: a data-parallel group of dp ranks split into dp/S shard groups of S
// consecutive ranks (each holds one copy of the layer-wise buffers, split S ways) and S replica
// groups of dp/S ranks (the ranks holding the same shard in different shard groups).
// Consecutive, not strided: ranks next to each other in a DP group share a node, so the big
// reduce-scatter / all-gather ((S-1)/S of the buffer each) stays inside a node and only the
// all-reduce of one shard (2(R-1)/R of N/S) crosses nodes (docs/shard_groups.md).
#pragma once

#include <vector>

#include "shardwise/comm/process_group.hpp"

namespace shardwise {

// Pure rank arithmetic, shared by make_shard_groups and its tests.
struct ShardGroupMembers {
  std::vector<int> shard;    // group ranks of this rank's shard group, in shard order
  std::vector<int> replica;  // group ranks holding the same shard, in replica order
};
// InvalidArgument when S does not divide the group size or a rank is out of range.
ShardGroupMembers shard_group_members(int group_size, int shard_group_size, int group_rank);

struct ShardGroups {
  ProcessGroupPtr shard;    // size S: reduce-scatter and all-gather of the layer-wise buffers
  ProcessGroupPtr replica;  // size dp/S: all-reduce of the owned shard across replicas
};

// Splits `group` (an MPI group) into shard and replica groups; collective over `group`.
// S == group size returns {group, a group of this rank alone}. InvalidArgument when S does not
// divide the group size or `group` is not an MPI group (and S < its size).
ShardGroups make_shard_groups(const ProcessGroupPtr& group, int shard_group_size);

}  // namespace shardwise
