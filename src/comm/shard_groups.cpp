#include "shardwise/comm/shard_groups.hpp"

#include "shardwise/comm/mpi_process_group.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise {

ShardGroupMembers shard_group_members(int group_size, int shard_group_size, int group_rank) {
  SW_REQUIRE(group_size >= 1 && shard_group_size >= 1 && group_size % shard_group_size == 0,
             InvalidArgument, "layer-wise shard group size ", shard_group_size,
             " does not divide the group size ", group_size);
  SW_REQUIRE(group_rank >= 0 && group_rank < group_size, InvalidArgument, "rank ", group_rank,
             " is outside a group of ", group_size);
  const int s = shard_group_size;
  const int replicas = group_size / s;
  ShardGroupMembers m;
  const int first = group_rank / s * s;  // consecutive blocks of S ranks
  for (int i = 0; i < s; ++i) m.shard.push_back(first + i);
  for (int r = 0; r < replicas; ++r) m.replica.push_back(r * s + group_rank % s);
  return m;
}

namespace {

std::string member_name(const std::string& kind, const ProcessGroupPtr& parent,
                        const std::vector<int>& ranks) {
  std::string name = str_cat(parent->name(), ".", kind, "[");
  for (std::size_t i = 0; i < ranks.size(); ++i) name += str_cat(i ? "," : "", ranks[i]);
  return name + "]";
}

}  // namespace

ShardGroups make_shard_groups(const ProcessGroupPtr& group, int shard_group_size) {
  SW_REQUIRE(group != nullptr, InvalidArgument, "make_shard_groups: no group");
  const ShardGroupMembers m = shard_group_members(group->size(), shard_group_size, group->rank());
  const int s = shard_group_size;
  ShardGroups out;
  // Colour = the lowest member, key = position: the split reproduces shard_group_members.
  out.shard = s == group->size() ? group
                                 : split_group(group, m.shard.front(), group->rank() % s,
                                               member_name("shard", group, m.shard));
  out.replica = split_group(group, m.replica.front(), group->rank() / s,
                            member_name("replica", group, m.replica));
  return out;
}

}  // namespace shardwise
