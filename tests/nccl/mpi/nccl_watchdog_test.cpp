// The NCCL group's watchdog: a wait that passes the group's timeout aborts the communicator and
// throws CommError naming the group, the operation and the timeout; later operations are refused.
#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "nccl/mpi/nccl_test_support.hpp"

namespace shardwise {
namespace {

using nccl_test::DeviceArray;

void expect_timeout_message(const CommError& e, const std::string& group, const char* op) {
  const std::string text = e.what();
  EXPECT_NE(text.find("group " + group), std::string::npos) << text;
  EXPECT_NE(text.find(op), std::string::npos) << text;
  EXPECT_NE(text.find("comm_timeout 0.5 s"), std::string::npos) << text;
  EXPECT_NE(text.find("ncclCommAbort"), std::string::npos) << text;
}

// One rank: the group's stream is held by a host callback (a stand-in for a peer that never
// arrives), so the all-reduce queued behind it cannot complete before the deadline.
TEST(NcclWatchdog, WaitPastTheTimeoutAbortsTheCommunicator) {
  ProcessGroupPtr world = init_mpi_world();
  SW_SKIP_WITHOUT_OWN_GPUS(world);
  ProcessGroupPtr solo = split_group(world, world->rank(), 0, "solo");
  NcclOptions options;
  options.comm_timeout_seconds = 0.5;
  NcclProcessGroup group(solo, nccl_test::device_of_rank(world->rank()), options);
  DeviceArray buffer(DType::kFloat32, 64, group.device());

  std::atomic<bool> release{false};
  SW_CUDA_OK(cudaLaunchHostFunc(
      static_cast<cudaStream_t>(group.stream()),
      [](void* flag) {
        while (!static_cast<std::atomic<bool>*>(flag)->load()) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
      },
      &release));
  // ncclCommAbort waits for what NCCL queued behind the callback (on an H200 it returned only
  // once the callback let go), so the stream is let go after 2 s even while the abort waits.
  std::thread releaser([&] {
    for (int i = 0; i < 200 && !release; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    release = true;
  });
  WorkPtr work = group.all_reduce(buffer.view(), ReduceOp::kSum);
  const auto start = std::chrono::steady_clock::now();
  try {
    work->wait();
    ADD_FAILURE() << "the wait did not time out";
  } catch (const CommError& e) {
    expect_timeout_message(e, "solo", "all_reduce #1");
  }
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GE(waited, 0.5);
  EXPECT_TRUE(group.aborted());
  EXPECT_THROW(work->wait(), CommError) << "wait() rethrows every time";
  try {
    group.barrier()->wait();
    ADD_FAILURE() << "an aborted group took another operation";
  } catch (const CommError& e) {
    EXPECT_NE(std::string(e.what()).find("aborted"), std::string::npos) << e.what();
  }
  release = true;
  releaser.join();
  cudaDeviceSynchronize();
}

// Two ranks or more: rank 1 never joins an all-reduce; every other rank's wait times out.
TEST(NcclWatchdog, PeerThatNeverJoinsTimesOut) {
  ProcessGroupPtr world = init_mpi_world();
  SW_SKIP_WITHOUT_OWN_GPUS(world);
  if (world->size() < 2) GTEST_SKIP() << "a peer that never joins needs two GPUs (one rank here)";
  NcclOptions options;
  options.comm_timeout_seconds = 0.5;
  NcclProcessGroup group(world, nccl_test::device_of_rank(world->rank()), options);
  DeviceArray buffer(DType::kFloat32, 1 << 16, group.device());
  group.barrier()->wait();
  if (world->rank() != 1) {
    try {
      group.all_reduce(buffer.view(), ReduceOp::kSum)->wait();
      ADD_FAILURE() << "the all-reduce completed without rank 1";
    } catch (const CommError& e) {
      expect_timeout_message(e, world->name(), "all_reduce #2");
    }
    EXPECT_TRUE(group.aborted());
  }
  world->barrier()->wait();
  if (world->rank() == 1) group.abort();
}

}  // namespace
}  // namespace shardwise
