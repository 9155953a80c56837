// Child side of tests/comm/run_rank_main_abort_test.cpp: only active when that test launches this
// binary under mpirun with SHARDWISE_COMM_ABORT_CHILD=1. Rank 1 throws inside run_rank_main while
// the others wait in a barrier that can never finish: the job must end with exit code 2 instead
// of hanging.
#include <gtest/gtest.h>

#include <cstdlib>

#include "shardwise/comm/mpi_process_group.hpp"

namespace shardwise {
namespace {

TEST(RunRankMainChild, OneRankThrowsAndTheJobAborts) {
  const char* flag = std::getenv("SHARDWISE_COMM_ABORT_CHILD");
  if (flag == nullptr || std::string(flag) != "1") GTEST_SKIP() << "run by the abort test only";
  ProcessGroupPtr world = init_mpi_world();
  run_rank_main([&]() -> int {
    if (world->rank() == 1) throw ConfigError("rank 1 failed on purpose: bad field `lr`");
    world->barrier()->wait();  // never completes: rank 1 does not arrive
    return 0;
  });
  ADD_FAILURE() << "rank " << world->rank() << " survived the abort";
}

}  // namespace
}  // namespace shardwise
