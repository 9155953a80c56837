// Child side of tests/comm/comm_watchdog_test.cpp: only active when that test launches this
// binary under mpirun with SHARDWISE_COMM_WATCHDOG_CHILD set to "collective", "shared_memory" or
// "recv". Rank 1 freezes itself (SIGSTOP) while rank 0 waits for it in an all_reduce, a
// shared-memory reduce_scatter or a recv on a group with a
// 3 s comm timeout: the watchdog must report the wait and abort the job. Rank 0 also prints how
// much CPU the process used while it waited.
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "comm/comm_test_data.hpp"
#include "shardwise/comm/mpi_process_group.hpp"
#include "shardwise/core/cpu_time.hpp"

namespace shardwise {
namespace {

constexpr double kTimeoutSeconds = 3.0;

// Prints the process's CPU use over 0.5 s .. 2.0 s of the wait (the watchdog fires at 3 s).
void report_cpu_while_waiting() {
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const double cpu0 = process_cpu_seconds();
  const auto t0 = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  const double cpu = process_cpu_seconds() - cpu0;
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("watchdog child: cpu_while_waiting=%.3f wall=%.3f\n", cpu, wall);
  std::fflush(stdout);
}

TEST(WatchdogChild, AFrozenPeerIsReportedAndTheJobAborts) {
  const char* mode_env = std::getenv("SHARDWISE_COMM_WATCHDOG_CHILD");
  if (mode_env == nullptr) GTEST_SKIP() << "run by the watchdog test only";
  const std::string mode = mode_env;
  ProcessGroupOptions options;
  options.comm_timeout_seconds = kTimeoutSeconds;
  ProcessGroupPtr world = init_mpi_world(options);
  // Split groups inherit the timeout: the frozen wait happens on one.
  ProcessGroupPtr pair = split_group(world, 0, world->rank(), "watchdog-pair");
  testing_comm::Buffer data = testing_comm::rank_data(DType::kFloat32, 5, pair->rank(), 1000);
  // shared_memory: reduce-scatters of 8 KB shards, which run through the group's segment (set
  // up by the first one), so the frozen wait is a wait on the peer's flag in shared memory.
  testing_comm::Buffer shard(DType::kFloat32, 2000);
  testing_comm::Buffer input = testing_comm::rank_data(DType::kFloat32, 6, pair->rank(), 4000);
  auto operation = [&] {
    if (mode == "shared_memory") {
      return pair->reduce_scatter(shard.view(), input.view(), ReduceOp::kSum);
    }
    return pair->all_reduce(data.view(), ReduceOp::kSum);
  };
  for (int i = 0; i < 3; ++i) operation()->wait();
  pair->barrier()->wait();
  if (pair->rank() == 1) std::raise(SIGSTOP);  // frozen until the job is torn down
  std::thread reporter(report_cpu_while_waiting);
  reporter.detach();
  const auto now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  std::printf("watchdog child: rank %d starts waiting at %lld ms\n", pair->rank(),
              static_cast<long long>(now_ms));
  std::fflush(stdout);
  if (mode == "recv") {
    pair->recv(data.view(), 1, 7)->wait();
  } else {
    operation()->wait();
  }
  if (mode == "shared_memory" && pair->rank() == 1) {
    // Thawed by the job's teardown, rank 1 finds rank 0's data in the segment and may finish
    // its reduce_scatter: only rank 0, the waiting side, must never get past it.
    std::this_thread::sleep_for(std::chrono::seconds(60));
  }
  ADD_FAILURE() << "rank " << pair->rank() << " survived the watchdog";
}

}  // namespace
}  // namespace shardwise
