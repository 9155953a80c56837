// The collective watchdog end to end: a 2-rank job in which rank 1 freezes (SIGSTOP) while rank 0
// waits for it with a 3 s comm timeout (tests/comm/mpi/watchdog_child_test.cpp). The job must end
// with kCommTimeoutExitCode (not hang until it is killed), rank 0 must name the operation, group,
// ranks and sequence number, and the waiting process must not burn a core meanwhile.
#include <gtest/gtest.h>

#include <cstdlib>
#include <regex>
#include <string>

#include "comm/mpirun_child.hpp"
#include "shardwise/comm/comm_deadline.hpp"

namespace shardwise {
namespace {

// CPU seconds per second the waiting process may use. An MPI wait calls MPI_Test at least every
// kDriveProgressMaxSleep (100 us) to keep transfers moving: measured 0.12-0.16 idle and beside
// two busy loops on the 2-core VM, and one loaded run passed 0.25. A shared-memory wait backs
// off to 1 ms sleeps: 0.03. A spinning rank uses ~1.
constexpr double kMpiWaitCpuShare = 0.4;
constexpr double kSharedMemoryWaitCpuShare = 0.1;

void expect_watchdog_aborts(const std::string& mode, const std::string& expected_head,
                            const std::string& expected_waiting_for) {
  const testing_comm::ChildJob job = testing_comm::run_mpi_child(
      2, "WatchdogChild.*", "SHARDWISE_COMM_WATCHDOG_CHILD=" + mode, 60);
  if (!job.available) GTEST_SKIP() << job.why_not;
  const std::string& out = job.output;
  ASSERT_EQ(job.exit_code, kCommTimeoutExitCode) << out;  // 124: hung until `timeout` killed it
  EXPECT_NE(out.find(expected_head), std::string::npos) << out;
  EXPECT_NE(out.find(expected_waiting_for), std::string::npos) << out;
  EXPECT_EQ(out.find("survived the watchdog"), std::string::npos) << out;

  std::smatch m;
  ASSERT_TRUE(std::regex_search(out, m, std::regex("has not completed after ([0-9.]+) s"))) << out;
  // Never before the timeout; that it fires at all, rather than the job hanging until the 60 s
  // limit kills it, is the exit code above.
  EXPECT_GE(std::stod(m[1]), 3.0) << out;

  // Rank 0's process while it waited: polling with back-off, not spinning.
  ASSERT_TRUE(std::regex_search(out, m, std::regex("cpu_while_waiting=([0-9.]+) wall=([0-9.]+)")))
      << out;
  const double share = mode == "shared_memory" ? kSharedMemoryWaitCpuShare : kMpiWaitCpuShare;
  EXPECT_LT(std::stod(m[1]), share * std::stod(m[2])) << out;
}

TEST(CommWatchdog, FrozenRankInACollectiveAbortsTheJobWithTheWatchdogMessage) {
  expect_watchdog_aborts("collective",
                         "comm watchdog: rank 0 of group watchdog-pair (world ranks 0,1): "
                         "all_reduce #5 has not completed after",
                         "waiting for one or more of group ranks 1 (world ranks 1)");
}

TEST(CommWatchdog, FrozenPeerOfASharedMemoryCollectiveAbortsTheJobNamingThePeer) {
  expect_watchdog_aborts("shared_memory",
                         "comm watchdog: rank 0 of group watchdog-pair (world ranks 0,1): "
                         "reduce_scatter #5 has not completed after",
                         "waiting for group rank 1 (world rank 1), a peer it exchanges data with");
}

TEST(CommWatchdog, FrozenPeerOfARecvAbortsTheJobNamingThePeer) {
  expect_watchdog_aborts("recv",
                         "comm watchdog: rank 0 of group watchdog-pair (world ranks 0,1): "
                         "recv #5 from rank 1 has not completed after",
                         "waiting for group rank 1 (world rank 1)");
}

}  // namespace
}  // namespace shardwise
