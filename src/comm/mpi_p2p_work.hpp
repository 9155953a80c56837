// Work of one send or recv of the MPI backend: the request is posted in issue order on the
// group's worker and completed by whoever asks first (wait / is_completed), polling under the
// watchdog's deadline. The mutex is held for one MPI_Test at a time, never across a wait, so
// is_completed() from another thread answers at once while a wait() is in progress.
#pragma once

#include <mpi.h>

#include <chrono>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <string>

#include "shardwise/comm/comm_deadline.hpp"
#include "shardwise/comm/traffic_model.hpp"

namespace shardwise {

class P2PWork final : public Work {
 public:
  // `wait` describes the operation for the watchdog (its sequence is set by posted());
  // `where` prefixes error messages.
  P2PWork(CollectiveKind kind, TensorView buffer, std::string where, CommWaitDescription wait,
          double timeout_seconds, std::shared_ptr<TrafficRecorder> traffic);

  // Called on the worker once the request is posted: the operation is the group's
  // `sequence`-th, and its busy time is counted from now.
  void posted(MPI_Request request, std::uint64_t sequence);
  void failed(std::exception_ptr error);

  // Blocks until the request completed; the deadline counts from the call, so a receive posted
  // long before its sender is ready is not a timeout.
  void wait() override;
  bool is_completed() override;

 private:
  // Called with mutex_ held once the request finished.
  void finish(int rc, const MPI_Status& status);

  CollectiveKind kind_;
  TensorView buffer_;
  std::string where_;  // "recv on group world (rank 1 of 4) from rank 0 tag 3"
  CommWaitDescription wait_;
  double timeout_seconds_;
  std::shared_ptr<TrafficRecorder> traffic_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool posted_ = false;
  bool done_ = false;
  MPI_Request request_ = MPI_REQUEST_NULL;
  std::chrono::steady_clock::time_point posted_at_;
  std::exception_ptr error_;
};

}  // namespace shardwise
