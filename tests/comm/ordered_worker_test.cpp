// OrderedWorker runs operations one at a time in issue order; Work carries their errors.
#include "shardwise/comm/ordered_worker.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace shardwise {
namespace {

TEST(OrderedWorker, RunsOpsFromManyThreadsOneAtATimeInIssueOrderOnOneOtherThread) {
  // Four threads submit at once and each op lasts long enough (a sleep) for a second executor to
  // overlap it: an implementation running ops on the submitting threads or on a pool would show
  // max_running > 1, reordered ops, or more than one executing thread.
  constexpr int kThreads = 4;
  constexpr int kPerThread = 25;
  std::mutex issue_mutex;
  std::vector<int> issued;    // global issue order (ids), taken together with submit()
  std::vector<int> executed;  // order the worker ran them in
  std::set<std::thread::id> executors;
  std::atomic<int> running{0};
  std::atomic<int> max_running{0};
  std::vector<WorkPtr> works;
  {
    OrderedWorker worker("test");
    auto submit_some = [&](int t) {
      for (int i = 0; i < kPerThread; ++i) {
        const int id = t * kPerThread + i;
        std::lock_guard<std::mutex> lock(issue_mutex);
        issued.push_back(id);
        works.push_back(worker.submit([&, id] {
          const int now = ++running;
          int seen = max_running.load();
          while (now > seen && !max_running.compare_exchange_weak(seen, now)) {
          }
          executors.insert(std::this_thread::get_id());
          executed.push_back(id);
          std::this_thread::sleep_for(std::chrono::microseconds(200));
          --running;
        }));
      }
    };
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) threads.emplace_back(submit_some, t);
    for (auto& th : threads) th.join();
    for (auto& w : works) w->wait();
  }
  ASSERT_EQ(executed.size(), static_cast<std::size_t>(kThreads * kPerThread));
  EXPECT_EQ(executed, issued);
  EXPECT_EQ(max_running.load(), 1);
  ASSERT_EQ(executors.size(), 1u);
  EXPECT_NE(*executors.begin(), std::this_thread::get_id());
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

TEST(OrderedWorker, WaitBlocksUntilTheOpFinished) {
  std::atomic<bool> release{false};
  OrderedWorker worker("test");
  WorkPtr slow = worker.submit([&] {
    while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(slow->is_completed());
  release = true;
  slow->wait();
  EXPECT_TRUE(slow->is_completed());
}

TEST(OrderedWorker, ShutdownFinishesTheRunningOpAndFailsQueuedOnesWithoutRunningThem) {
  // Queued ops stand for collectives whose peer died: each would block (here: for a second).
  // Shutdown must not run them: it finishes the running op, fails the rest, and returns.
  std::atomic<bool> started{false};
  std::atomic<bool> release{false};
  std::atomic<int> queued_ran{0};
  WorkPtr running;
  std::vector<WorkPtr> queued;
  std::atomic<bool> cancelled_post{false};
  std::thread releaser;
  {
    OrderedWorker worker("dp[0,1]");
    running = worker.submit([&] {
      started = true;
      while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    });
    for (int i = 0; i < 5; ++i) {
      queued.push_back(worker.submit([&] {
        ++queued_ran;
        std::this_thread::sleep_for(std::chrono::seconds(1));
      }));
    }
    worker.post([&] { ++queued_ran; }, [&](std::exception_ptr) { cancelled_post = true; });
    while (!started) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    releaser = std::thread([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      release = true;
    });
  }  // destructor: waits for the running op only
  releaser.join();
  EXPECT_EQ(queued_ran.load(), 0) << "shutdown ran the queued ops";
  EXPECT_TRUE(running->is_completed());
  EXPECT_NO_THROW(running->wait());
  EXPECT_TRUE(cancelled_post.load());
  for (auto& w : queued) {
    EXPECT_TRUE(w->is_completed());
    try {
      w->wait();
      ADD_FAILURE() << "a dropped op reported success";
    } catch (const CommError& e) {
      EXPECT_NE(std::string(e.what()).find("group dp[0,1] shut down before"), std::string::npos)
          << e.what();
    }
  }
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
