// OrderedWorker runs operations one at a time in issue order; Work carries their errors.
#include "shardwise/comm/ordered_worker.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>

namespace shardwise {
namespace {

TEST(OrderedWorker, RunsInIssueOrderOneAtATime) {
  std::vector<int> order;
  std::atomic<int> running{0};
  std::atomic<int> max_running{0};
  std::vector<WorkPtr> works;
  {
    OrderedWorker worker("test");
    for (int i = 0; i < 200; ++i) {
      works.push_back(worker.submit([&, i] {
        const int now = ++running;
        max_running = std::max(max_running.load(), now);
        order.push_back(i);
        --running;
      }));
    }
    works.back()->wait();
  }
  ASSERT_EQ(order.size(), 200u);
  for (int i = 0; i < 200; ++i) EXPECT_EQ(order[static_cast<std::size_t>(i)], i);
  EXPECT_EQ(max_running.load(), 1);
  for (auto& w : works) EXPECT_TRUE(w->is_completed());
}

TEST(OrderedWorker, ErrorsAreRethrownOnEveryWaitAndDoNotStopTheQueue) {
  OrderedWorker worker("test");
  WorkPtr bad = worker.submit([] { throw CommError("peer vanished"); });
  bool ran = false;
  WorkPtr good = worker.submit([&] { ran = true; });
  EXPECT_THROW(bad->wait(), CommError);
  EXPECT_THROW(bad->wait(), CommError);
  good->wait();
  EXPECT_TRUE(ran);
}

TEST(OrderedWorker, WaitBlocksUntilDoneAndDestructorDrainsTheQueue) {
  std::atomic<bool> release{false};
  std::atomic<int> done{0};
  WorkPtr slow;
  {
    OrderedWorker worker("test");
    slow = worker.submit([&] {
      while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      ++done;
    });
    for (int i = 0; i < 5; ++i) worker.submit([&] { ++done; });
    EXPECT_FALSE(slow->is_completed());
    release = true;
  }  // destructor runs the rest
  EXPECT_TRUE(slow->is_completed());
  EXPECT_EQ(done.load(), 6);
}

TEST(OrderedWorker, FinishedWork) {
  EXPECT_TRUE(finished_work()->is_completed());
  EXPECT_NO_THROW(finished_work()->wait());
  WorkPtr failed = finished_work(std::make_exception_ptr(InvalidArgument("x")));
  EXPECT_TRUE(failed->is_completed());
  EXPECT_THROW(failed->wait(), InvalidArgument);
}

}  // namespace
}  // namespace shardwise
