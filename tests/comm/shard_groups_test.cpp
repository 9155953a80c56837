// Layer-wise shard groups as rank arithmetic: consecutive shard groups, replica groups of the
// ranks with the same shard, partitions of the group, and errors naming the sizes.
#include "shardwise/comm/shard_groups.hpp"

#include <gtest/gtest.h>

#include <set>

#include "shardwise/core/error.hpp"

namespace shardwise {
namespace {

TEST(ShardGroups, EightRanksInShardGroupsOfTwo) {
  // dp = 8, S = 2: shard groups {0,1} {2,3} {4,5} {6,7}; replicas {0,2,4,6} and {1,3,5,7}.
  EXPECT_EQ(shard_group_members(8, 2, 5).shard, (std::vector<int>{4, 5}));
  EXPECT_EQ(shard_group_members(8, 2, 5).replica, (std::vector<int>{1, 3, 5, 7}));
  EXPECT_EQ(shard_group_members(8, 2, 0).shard, (std::vector<int>{0, 1}));
  EXPECT_EQ(shard_group_members(8, 2, 0).replica, (std::vector<int>{0, 2, 4, 6}));
  // dp = 4, S = 4: one shard group, each rank its own replica group.
  EXPECT_EQ(shard_group_members(4, 4, 2).shard, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(shard_group_members(4, 4, 2).replica, (std::vector<int>{2}));
  // S = 1: every rank alone holds everything; one replica group of all.
  EXPECT_EQ(shard_group_members(3, 1, 1).shard, (std::vector<int>{1}));
  EXPECT_EQ(shard_group_members(3, 1, 1).replica, (std::vector<int>{0, 1, 2}));
}

TEST(ShardGroups, ShardAndReplicaGroupsPartitionTheGroupAndMeetInOneRank) {
  for (int dp : {1, 2, 4, 6, 12, 16}) {
    for (int s = 1; s <= dp; ++s) {
      if (dp % s != 0) continue;
      SCOPED_TRACE(testing::Message() << "dp " << dp << " S " << s);
      std::set<std::vector<int>> shard_groups, replica_groups;
      for (int r = 0; r < dp; ++r) {
        const ShardGroupMembers m = shard_group_members(dp, s, r);
        ASSERT_EQ(static_cast<int>(m.shard.size()), s);
        ASSERT_EQ(static_cast<int>(m.replica.size()), dp / s);
        // The rank's shard index is its position in the shard group, its replica index its
        // position in the replica group, and both contain it.
        EXPECT_EQ(m.shard[static_cast<std::size_t>(r % s)], r);
        EXPECT_EQ(m.replica[static_cast<std::size_t>(r / s)], r);
        for (int x : m.replica) EXPECT_EQ(x % s, r % s) << "a replica holds the same shard";
        for (std::size_t i = 1; i < m.shard.size(); ++i) EXPECT_EQ(m.shard[i], m.shard[i - 1] + 1);
        shard_groups.insert(m.shard);
        replica_groups.insert(m.replica);
      }
      EXPECT_EQ(static_cast<int>(shard_groups.size()), dp / s);
      EXPECT_EQ(static_cast<int>(replica_groups.size()), s);
    }
  }
}

TEST(ShardGroups, SizesThatDoNotDivideAreRejectedNamingThem) {
  try {
    shard_group_members(6, 4, 0);
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("shard group size 4 does not divide the group size 6"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(shard_group_members(4, 2, 4), InvalidArgument);
  EXPECT_THROW(shard_group_members(4, 0, 0), InvalidArgument);
}

}  // namespace
}  // namespace shardwise
