// Send/recv Work: is_completed() answers while another thread waits on the same Work, and the
// busy time of a send/recv is the time its request was in flight (not 0, not another
// operation's time). The ranks order their steps by messages, not by sleeping, so a loaded
// machine cannot change the outcome.
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

// A group whose watchdog turns a hang into a failed job within seconds, not ten minutes.
ProcessGroupPtr group_with_short_timeout(const ProcessGroupPtr& world, const std::string& name) {
  ProcessGroupPtr group = split_group(world, 0, world->rank(), name);
  set_process_group_options(group, ProcessGroupOptions{60});
  return group;
}

TEST(PointToPointWork, IsCompletedAnswersWhileAnotherThreadWaits) {
  ProcessGroupPtr world = init_mpi_world();
  if (world->size() < 2) GTEST_SKIP() << "needs two ranks";
  ProcessGroupPtr group = group_with_short_timeout(world, "p2p-is-completed");
  const int me = group->rank();
  Buffer message = rank_data(DType::kFloat32, 31, 0, 4096);
  Buffer got(DType::kFloat32, 4096);
  Buffer go(DType::kInt32, 1);
  if (me == 0) {
    // Rank 1 asks is_completed() before it lets this rank send: the answer cannot wait for the
    // message. A wait that held the Work's lock across MPI_Wait would block is_completed() here
    // until the watchdog aborts the job.
    group->recv(go.view(), 1, 20)->wait();
    group->send(message.view(), 1, 21)->wait();
  } else if (me == 1) {
    WorkPtr recv = group->recv(got.view(), 0, 21);
    std::thread waiter([&] { recv->wait(); });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // usually inside wait() by now
    EXPECT_FALSE(recv->is_completed()) << "nothing was sent yet";
    group->send(go.view(), 0, 20)->wait();
    waiter.join();
    EXPECT_TRUE(recv->is_completed());
    EXPECT_TRUE(got.same_bits(message));
  }
  group->barrier()->wait();
}

TEST(PointToPointWork, BusyTimeOfARecvIsTheTimeItWasInFlight) {
  ProcessGroupPtr world = init_mpi_world();
  if (world->size() < 2) GTEST_SKIP() << "needs two ranks";
  ProcessGroupPtr group = group_with_short_timeout(world, "p2p-busy-time");
  const int me = group->rank();
  Buffer message = rank_data(DType::kInt32, 32, 0, 256);
  Buffer go(DType::kInt32, 1);
  group->reset_traffic();
  if (me == 0) {
    Buffer probe(DType::kInt32, 1);
    group->recv(probe.view(), 1, 24)->wait();
    group->recv(go.view(), 1, 23)->wait();
    group->send(message.view(), 1, 22)->wait();
  } else if (me == 1) {
    Buffer got(DType::kInt32, 256);
    const auto start = Clock::now();
    WorkPtr recv = group->recv(got.view(), 0, 22);
    // The worker posts in issue order, so once this send was posted the recv was too; the
    // message is sent only after `go`, so the recv was in flight for all of [posted, go].
    Buffer probe(DType::kInt32, 1);
    group->send(probe.view(), 0, 24)->wait();
    const auto pending_from = Clock::now();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const double pending = seconds_since(pending_from);
    group->send(go.view(), 0, 23)->wait();
    recv->wait();
    const double waited = seconds_since(start);
    const TrafficCounters t = group->traffic();
    // It used to be taken from a thread-local start that the waiting thread never set: 0.
    EXPECT_GE(t.busy_seconds.at(CollectiveKind::kRecv), pending);
    EXPECT_LE(t.busy_seconds.at(CollectiveKind::kRecv), waited);
    EXPECT_EQ(t.calls.at(CollectiveKind::kRecv), 1);
  }
  group->barrier()->wait();
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
