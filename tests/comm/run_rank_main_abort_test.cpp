// run_rank_main across ranks: launches test_comm_mpi under `mpirun -np 2` with only its
// RunRankMainChild test enabled, in which rank 1 throws while rank 0 waits in a barrier. The job
// must end with exit code 2 and the error on stderr, not hang. Skips when mpirun or the MPI test
// binary (built next to this one) is missing.
#include <gtest/gtest.h>

#include "comm/mpirun_child.hpp"

namespace shardwise {
namespace {

TEST(RunRankMain, AnExceptionOnOneRankAbortsTheJobWithExitCode2) {
  const testing_comm::ChildJob job =
      testing_comm::run_mpi_child(2, "RunRankMainChild.*", "SHARDWISE_COMM_ABORT_CHILD=1", 120);
  if (!job.available) GTEST_SKIP() << job.why_not;
  const std::string& output = job.output;
  EXPECT_EQ(job.exit_code, 2) << output;  // 124 would mean the job hung until timeout
  EXPECT_NE(output.find("[rank 1/2] error: rank 1 failed on purpose: bad field `lr`"),
            std::string::npos)
      << output;
  EXPECT_EQ(output.find("survived the abort"), std::string::npos) << output;
}

}  // namespace
}  // namespace shardwise
