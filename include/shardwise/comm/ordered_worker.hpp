// A dedicated thread that runs a process group's operations one at a time in issue order, and the
// Work handle it completes. Every rank issues the same sequence, so running them in order on one
// thread keeps the collectives matched while the issuing thread goes on computing.
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "shardwise/comm/process_group.hpp"

namespace shardwise {

// Work that some other party marks complete (with or without an error).
class CompletionWork : public Work {
 public:
  void wait() override;
  bool is_completed() override;
  // Marks the work done; `error` (may be null) is rethrown by every wait().
  void complete(std::exception_ptr error);

 private:
  std::mutex mutex_;
  std::condition_variable done_cv_;
  bool done_ = false;
  std::exception_ptr error_;
};

// Work that is already finished: successfully when `error` is null, else wait() throws it.
WorkPtr finished_work(std::exception_ptr error = nullptr);

class OrderedWorker {
 public:
  explicit OrderedWorker(std::string name);
  // Lets the running operation finish, then joins the thread. Operations still queued do not run
  // (they may wait for a peer that is gone, and shutdown must not hang on them): their Work
  // fails with a CommError saying the group shut down.
  ~OrderedWorker();
  OrderedWorker(const OrderedWorker&) = delete;
  OrderedWorker& operator=(const OrderedWorker&) = delete;

  // Queues `op`; the returned work completes when `op` returned (or threw: wait() rethrows).
  WorkPtr submit(std::function<void()> op);
  // Queues `op` without a Work of its own, for operations whose completion is reported elsewhere
  // (a posted non-blocking request): `op` must catch its own errors. `cancel` is called instead
  // of `op` when the worker shuts down before running it.
  void post(std::function<void()> op, std::function<void(std::exception_ptr)> cancel);

 private:
  struct Task {
    std::function<void()> run;
    std::function<void(std::exception_ptr)> cancel;
  };
  void run();

  std::string name_;
  std::mutex mutex_;
  std::condition_variable queue_cv_;
  std::deque<Task> queue_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace shardwise
