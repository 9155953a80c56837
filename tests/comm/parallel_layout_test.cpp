// Pure rank arithmetic of the parallel groups: Megatron's documented example, error messages, and
// partition invariants over many size combinations.
#include "shardwise/comm/parallel_layout.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

namespace shardwise {
namespace {

std::vector<std::vector<int>> all_groups(const ParallelSizes& s, ParallelDim dim) {
  std::set<std::vector<int>> groups;
  for (int r = 0; r < s.tp * s.dp * s.pp; ++r) groups.insert(parallel_group_members(s, dim, r));
  return {groups.begin(), groups.end()};
}

TEST(ParallelLayout, MegatronDocstringExample) {
  // initialize_model_parallel's docstring: 16 GPUs, tp=2, pp=4 -> dp=2.
  const ParallelSizes s = resolve_parallel_sizes(ParallelSizes{.tp = 2, .pp = 4, .dp = 0}, 16);
  EXPECT_EQ(s.dp, 2);
  EXPECT_EQ(all_groups(s, ParallelDim::kTensor),
            (std::vector<std::vector<int>>{
                {0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}, {12, 13}, {14, 15}}));
  EXPECT_EQ(all_groups(s, ParallelDim::kData),
            (std::vector<std::vector<int>>{
                {0, 2}, {1, 3}, {4, 6}, {5, 7}, {8, 10}, {9, 11}, {12, 14}, {13, 15}}));
  EXPECT_EQ(all_groups(s, ParallelDim::kPipeline),
            (std::vector<std::vector<int>>{
                {0, 4, 8, 12}, {1, 5, 9, 13}, {2, 6, 10, 14}, {3, 7, 11, 15}}));
}

TEST(ParallelLayout, ExpertGroupsInsideAStage) {
  // 8 ranks, tp=2, dp=4, ep=2, etp=1: a stage is all 8 ranks; ep groups are consecutive pairs,
  // expert-dp strides by ep.
  const ParallelSizes s =
      resolve_parallel_sizes(ParallelSizes{.tp = 2, .dp = 0, .ep = 2, .etp = 1}, 8);
  EXPECT_EQ(parallel_dim_size(s, ParallelDim::kExpertData), 4);
  EXPECT_EQ(parallel_group_members(s, ParallelDim::kExpert, 5), (std::vector<int>{4, 5}));
  EXPECT_EQ(parallel_group_members(s, ParallelDim::kExpertData, 5), (std::vector<int>{1, 3, 5, 7}));
  // Default etp = tp = 2: expert-dp = tp*dp/(etp*ep) = 2.
  const ParallelSizes d = resolve_parallel_sizes(ParallelSizes{.tp = 2, .dp = 0, .ep = 2}, 8);
  EXPECT_EQ(d.etp, 2);
  EXPECT_EQ(parallel_group_members(d, ParallelDim::kExpertTensor, 5), (std::vector<int>{4, 5}));
  EXPECT_EQ(parallel_group_members(d, ParallelDim::kExpert, 5), (std::vector<int>{5, 7}));
  EXPECT_EQ(parallel_group_members(d, ParallelDim::kExpertData, 5), (std::vector<int>{1, 5}));
}

TEST(ParallelLayout, ErrorsNameTheSizes) {
  auto message = [](ParallelSizes s, int world) {
    try {
      resolve_parallel_sizes(s, world);
    } catch (const InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message({.tp = 4, .dp = 0}, 6), "world size 6 is not divisible by tp (4) * pp (1) = 4");
  EXPECT_EQ(message({.tp = 2, .dp = 3}, 4),
            "tp (2) * pp (1) * dp (3) = 6 does not equal world size 4");
  EXPECT_NE(message({.dp = 0, .ep = 3}, 4).find("ep (3)"), std::string::npos);
  EXPECT_NE(message({.tp = 0}, 4).find("tp=0"), std::string::npos);
  EXPECT_NE(message({.dp = -1}, 4).find("dp=-1"), std::string::npos);
}

TEST(ParallelLayout, GroupsPartitionTheWorldForManySizes) {
  for (int tp : {1, 2, 4}) {
    for (int pp : {1, 2, 3}) {
      for (int dp : {1, 2, 4, 6}) {
        for (int ep : {1, 2, 4}) {
          for (int etp : {0, 1, 2}) {
            const int world = tp * pp * dp;
            ParallelSizes s;
            try {
              s = resolve_parallel_sizes(
                  ParallelSizes{.tp = tp, .pp = pp, .dp = 0, .ep = ep, .etp = etp}, world);
            } catch (const InvalidArgument&) {
              const int e = etp == 0 ? tp : etp;
              EXPECT_NE((tp * dp) % (e * ep), 0) << tp << " " << pp << " " << dp << " " << ep;
              continue;
            }
            EXPECT_EQ(s.dp, dp);
            for (ParallelDim dim :
                 {ParallelDim::kTensor, ParallelDim::kData, ParallelDim::kPipeline,
                  ParallelDim::kExpert, ParallelDim::kExpertData, ParallelDim::kExpertTensor}) {
              const int n = parallel_dim_size(s, dim);
              std::vector<int> seen(static_cast<std::size_t>(world), 0);
              for (int r = 0; r < world; ++r) {
                const auto members = parallel_group_members(s, dim, r);
                ASSERT_EQ(static_cast<int>(members.size()), n);
                ASSERT_EQ(std::count(members.begin(), members.end(), r), 1);
                // Every member computes the same group.
                for (int m : members) ASSERT_EQ(parallel_group_members(s, dim, m), members);
                ++seen[static_cast<std::size_t>(members[0])];
              }
              // Group count = world / n, each listed once per member.
              int groups = 0;
              for (int c : seen) {
                if (c) {
                  EXPECT_EQ(c, n);
                  ++groups;
                }
              }
              EXPECT_EQ(groups, world / n) << parallel_dim_name(dim);
            }
            // Expert groups never leave the pipeline stage.
            for (int r = 0; r < world; ++r) {
              for (int m : parallel_group_members(s, ParallelDim::kExpert, r)) {
                EXPECT_EQ(m / (tp * dp), r / (tp * dp));
              }
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace shardwise
