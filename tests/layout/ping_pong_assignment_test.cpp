#include <gtest/gtest.h>

#include "layout/layout_test_models.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/layout/layout_algorithms.hpp"

namespace shardwise {
namespace {

TEST(PingPongAssignment, SeedExampleFourRanksTenParams) {
  // p0..p9 sorted by numel ascending (ids deliberately not in that order).
  ParamList params(10);
  const std::vector<int> rank_by_size = {3, 0, 9, 1, 8, 2, 7, 4, 6, 5};  // id -> size rank
  for (std::size_t id = 0; id < 10; ++id) {
    params[id] = layout_test::vec(str_cat("q", id), 100 + rank_by_size[id]);
  }
  std::vector<ParamId> p(10);  // p[k] = id of the k-th smallest
  for (std::size_t id = 0; id < 10; ++id) p[static_cast<std::size_t>(rank_by_size[id])] = id;
  std::vector<ParamId> ids = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  const auto ranks = ping_pong_shard_assignment(params, ids, 4);
  const std::vector<std::vector<ParamId>> expected = {
      {p[0], p[7], p[8]}, {p[1], p[6], p[9]}, {p[2], p[5]}, {p[3], p[4]}};
  EXPECT_EQ(ranks, expected);
}

TEST(PingPongAssignment, StableForEqualSizesAndValidatesRanks) {
  ParamList params = {layout_test::vec("a", 5), layout_test::vec("b", 5), layout_test::vec("c", 5)};
  const auto ranks = ping_pong_shard_assignment(params, {2, 0, 1}, 2);
  // Stable: equal sizes keep the given order 2, 0, 1 -> ranks 0, 1, 1.
  EXPECT_EQ(ranks, (std::vector<std::vector<ParamId>>{{2}, {0, 1}}));
  EXPECT_THROW(ping_pong_shard_assignment(params, {0}, 0), InvalidArgument);
  EXPECT_THROW(ping_pong_shard_assignment(params, {7}, 2), InvalidArgument);
}

}  // namespace
}  // namespace shardwise
