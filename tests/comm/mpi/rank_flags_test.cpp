// run_on_every_rank and ranks_differing_from_rank0: one rank's failure or difference reaches
// every rank (no rank left waiting), the failing rank keeps its own exception and the others
// learn exactly which ranks failed.
#include "shardwise/comm/rank_flags.hpp"

#include <gtest/gtest.h>

#include <stdexcept>

#include "shardwise/comm/mpi_process_group.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise {
namespace {

TEST(RunOnEveryRank, NoFailureGivesAnEmptyListOnEveryRank) {
  ProcessGroupPtr world = init_mpi_world();
  int ran = 0;
  EXPECT_TRUE(run_on_every_rank(*world, [&] { ++ran; }).empty());
  EXPECT_EQ(ran, 1);
}

TEST(RunOnEveryRank, TheFailingRankRethrowsItsOwnErrorAndTheOthersNameIt) {
  ProcessGroupPtr world = init_mpi_world();
  const int p = world->size();
  if (p < 2) GTEST_SKIP() << "needs two ranks";
  const int last = p - 1;
  if (world->rank() == last) {
    // Type and message survive: a shardwise error and a foreign one alike.
    EXPECT_THROW(run_on_every_rank(*world, [] { throw IoError("disk gone on this rank"); }),
                 IoError);
    try {
      run_on_every_rank(*world, [] { throw std::runtime_error("not ours"); });
      FAIL() << "no rethrow";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "not ours");
    }
  } else {
    for (int round = 0; round < 2; ++round) {
      EXPECT_EQ(run_on_every_rank(*world, [] {}), std::vector<int>{last}) << "round " << round;
    }
  }
  // The group is still usable afterwards.
  EXPECT_TRUE(run_on_every_rank(*world, [] {}).empty());
}

TEST(RanksDifferingFromRank0, NamesEveryRankWithAnotherValue) {
  ProcessGroupPtr world = init_mpi_world();
  const int p = world->size();
  std::vector<int> odd;
  for (int r = 1; r < p; r += 2) odd.push_back(r);
  const std::uint64_t value = world->rank() % 2 == 1 ? 0xdeadbeefcafeull : 0x1234ull;
  EXPECT_EQ(ranks_differing_from_rank0(*world, value), odd);
  EXPECT_EQ(rank_list(odd).empty(), odd.empty());
}

}  // namespace
}  // namespace shardwise
