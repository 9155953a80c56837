// check_same_on_all_ranks: a rank that disagrees makes every rank throw (no hang), naming what
// was compared and who disagrees.
#include <gtest/gtest.h>

#include "shardwise/comm/mpi_process_group.hpp"

namespace shardwise {
namespace {

TEST(Agreement, EqualValuesPass) {
  ProcessGroupPtr world = init_mpi_world();
  EXPECT_NO_THROW(world->check_same_on_all_ranks(0x1234abcdull, "layout hash"));
}

TEST(Agreement, OneDisagreeingRankRaisesOnEveryRank) {
  ProcessGroupPtr world = init_mpi_world();
  const int p = world->size();
  if (p < 2) GTEST_SKIP() << "needs two ranks";
  const int odd_one = p - 1;
  const std::uint64_t value = world->rank() == odd_one ? 7 : 42;
  try {
    world->check_same_on_all_ranks(value, "layout hash of buffer 0");
    FAIL() << "rank " << world->rank() << " did not raise";
  } catch (const CommError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("layout hash of buffer 0"), std::string::npos) << msg;
    EXPECT_NE(msg.find("disagreeing rank(s) " + std::to_string(odd_one) + " "), std::string::npos)
        << msg;
    EXPECT_NE(msg.find("has 7"), std::string::npos) << msg;
  }
  // The group is still usable afterwards.
  EXPECT_NO_THROW(world->check_same_on_all_ranks(5, "after"));
  world->barrier()->wait();
}

TEST(Agreement, SeveralDisagreeingRanksAreAllNamed) {
  ProcessGroupPtr world = init_mpi_world();
  const int p = world->size();
  if (p < 4) GTEST_SKIP() << "needs four ranks";
  // Ranks 0 and 2 share the most common value; ranks 1 and 3 each hold another one.
  const std::uint64_t value =
      static_cast<std::uint64_t>(world->rank() % 2 == 0 ? 1 : 100 + world->rank());
  try {
    world->check_same_on_all_ranks(value, "step");
    FAIL() << "no error";
  } catch (const CommError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("disagreeing rank(s) 1,3"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace shardwise
