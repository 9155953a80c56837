// Send/recv Work: is_completed() answers while another thread waits on the same Work, and the
// busy time of a send/recv is the time its request was in flight (not 0, not another
// operation's time).
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "comm/comm_test_data.hpp"
#include "shardwise/comm/mpi_process_group.hpp"

namespace shardwise {
namespace {

using testing_comm::Buffer;
using testing_comm::rank_data;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

TEST(PointToPointWork, IsCompletedAnswersAtOnceWhileAnotherThreadWaits) {
  ProcessGroupPtr world = init_mpi_world();
  if (world->size() < 2) GTEST_SKIP() << "needs two ranks";
  const int me = world->rank();
  Buffer message = rank_data(DType::kFloat32, 31, 0, 4096);
  Buffer got(DType::kFloat32, 4096);
  world->barrier()->wait();
  if (me == 0) {
    // Late sender: rank 1's recv is pending for ~1.5 s.
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    world->send(message.view(), 1, 21)->wait();
  } else if (me == 1) {
    WorkPtr recv = world->recv(got.view(), 0, 21);
    std::thread waiter([&] { recv->wait(); });
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the waiter is waiting
    const auto start = Clock::now();
    recv->is_completed();
    // A wait that held the Work's lock across MPI_Wait blocked this until the message came.
    EXPECT_LT(seconds_since(start), 0.5);
    waiter.join();
    EXPECT_TRUE(recv->is_completed());
    EXPECT_TRUE(got.same_bits(message));
  }
  world->barrier()->wait();
}

TEST(PointToPointWork, BusyTimeOfARecvIsTheTimeItWasInFlight) {
  ProcessGroupPtr world = init_mpi_world();
  if (world->size() < 2) GTEST_SKIP() << "needs two ranks";
  const int me = world->rank();
  Buffer message = rank_data(DType::kInt32, 32, 0, 256);
  world->barrier()->wait();
  world->reset_traffic();
  if (me == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    world->send(message.view(), 1, 22)->wait();
  } else if (me == 1) {
    Buffer got(DType::kInt32, 256);
    const auto start = Clock::now();
    world->recv(got.view(), 0, 22)->wait();
    const double waited = seconds_since(start);
    const TrafficCounters t = world->traffic();
    // Recorded from posting to completion: about the sender's delay, never more than the wait.
    // (It used to be taken from a thread-local start that the waiting thread never set: 0.)
    EXPECT_GE(t.busy_seconds.at(CollectiveKind::kRecv), 0.2);
    EXPECT_LE(t.busy_seconds.at(CollectiveKind::kRecv), waited + 1e-3);
    EXPECT_EQ(t.calls.at(CollectiveKind::kRecv), 1);
  }
  world->barrier()->wait();
}

TEST(ProcessGroupOptions, DefaultsInheritanceAndValidation) {
  ProcessGroupPtr world = init_mpi_world();
  EXPECT_EQ(process_group_options(world).comm_timeout_seconds, kDefaultCommTimeoutSeconds);
  ProcessGroupPtr a = split_group(world, 0, world->rank(), "options-a");
  set_process_group_options(a, ProcessGroupOptions{42.5});
  ProcessGroupPtr b = split_group(a, 0, a->rank(), "options-b");
  EXPECT_EQ(process_group_options(b).comm_timeout_seconds, 42.5);  // inherited from its parent
  EXPECT_EQ(process_group_options(world).comm_timeout_seconds, kDefaultCommTimeoutSeconds);
  try {
    set_process_group_options(b, ProcessGroupOptions{-1});
    FAIL() << "negative timeout accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("group options-b comm_timeout"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(process_group_options(b).comm_timeout_seconds, 42.5);  // unchanged by the failure
  b->barrier()->wait();
}

}  // namespace
}  // namespace shardwise
