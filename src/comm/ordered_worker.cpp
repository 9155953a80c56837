#include "shardwise/comm/ordered_worker.hpp"

#include <utility>

#include "shardwise/core/logging.hpp"

namespace shardwise {

void CompletionWork::wait() {
  std::unique_lock<std::mutex> lock(mutex_);
  done_cv_.wait(lock, [this] { return done_; });
  if (error_) std::rethrow_exception(error_);
}

bool CompletionWork::is_completed() {
  std::lock_guard<std::mutex> lock(mutex_);
  return done_;
}

void CompletionWork::complete(std::exception_ptr error) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    done_ = true;
    error_ = std::move(error);
  }
  done_cv_.notify_all();
}

WorkPtr finished_work(std::exception_ptr error) {
  auto work = std::make_shared<CompletionWork>();
  work->complete(std::move(error));
  return work;
}

OrderedWorker::OrderedWorker(std::string name) : name_(std::move(name)) {
  thread_ = std::thread([this] { run(); });
}

OrderedWorker::~OrderedWorker() {
  std::deque<Task> dropped;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    dropped.swap(queue_);
  }
  queue_cv_.notify_all();
  for (Task& task : dropped) {
    task.cancel(std::make_exception_ptr(CommError(str_cat(
        "group ", name_, " shut down before this operation ran (it was still queued)"))));
  }
  thread_.join();
}

WorkPtr OrderedWorker::submit(std::function<void()> op) {
  auto work = std::make_shared<CompletionWork>();
  post(
      [work, op = std::move(op)] {
        std::exception_ptr error;
        try {
          op();
        } catch (...) {
          error = std::current_exception();
        }
        work->complete(error);
      },
      [work](std::exception_ptr error) { work->complete(std::move(error)); });
  return work;
}

void OrderedWorker::post(std::function<void()> op,
                         std::function<void(std::exception_ptr)> cancel) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    SW_CHECK(!stopping_, "operation queued on worker of group ", name_, " while it shuts down");
    queue_.push_back(Task{std::move(op), std::move(cancel)});
  }
  queue_cv_.notify_one();
}

void OrderedWorker::run() {
  for (;;) {
    std::function<void()> op;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      queue_cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;  // the destructor took what was queued
      op = std::move(queue_.front().run);
      queue_.pop_front();
    }
    try {
      op();
    } catch (const std::exception& e) {
      // post() ops report their own errors; one escaping is a bug, but must not kill the thread.
      log::error("worker of group ", name_, ": unhandled error: ", e.what());
    } catch (...) {
      log::error("worker of group ", name_, ": unhandled non-standard exception");
    }
  }
}

}  // namespace shardwise
