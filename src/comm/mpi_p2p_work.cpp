#include "mpi_p2p_work.hpp"

#include "mpi_wait.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise {

P2PWork::P2PWork(CollectiveKind kind, TensorView buffer, std::string where,
                 CommWaitDescription wait, double timeout_seconds,
                 std::shared_ptr<TrafficRecorder> traffic)
    : kind_(kind),
      buffer_(buffer),
      where_(std::move(where)),
      wait_(std::move(wait)),
      timeout_seconds_(timeout_seconds),
      traffic_(std::move(traffic)) {}

void P2PWork::posted(MPI_Request request, std::uint64_t sequence) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    request_ = request;
    wait_.sequence = sequence;
    posted_at_ = std::chrono::steady_clock::now();
    posted_ = true;
  }
  cv_.notify_all();
}

void P2PWork::failed(std::exception_ptr error) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    error_ = std::move(error);
    done_ = true;
  }
  cv_.notify_all();
}

void P2PWork::wait() {
  {
    // Posting is bounded: the worker runs what is queued before it under the same deadline.
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [this] { return posted_ || done_; });
  }
  const auto start = std::chrono::steady_clock::now();
  if (!poll_until([this] { return is_completed(); },
                  std::chrono::duration<double>(timeout_seconds_), PollMode::kDrivesProgress)) {
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    CommWaitDescription wait;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      wait = wait_;
    }
    abort_on_comm_timeout(wait, waited, timeout_seconds_);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (error_) std::rethrow_exception(error_);
}

bool P2PWork::is_completed() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (done_ || !posted_) return done_;
  int flag = 0;
  MPI_Status status;
  const int rc = MPI_Test(&request_, &flag, &status);
  if (rc != MPI_SUCCESS || flag) finish(rc, status);
  return done_;
}

void P2PWork::finish(int rc, const MPI_Status& status) {
  done_ = true;
  const double busy =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - posted_at_).count();
  try {
    if (rc != MPI_SUCCESS) {
      throw CommError(str_cat(where_, " failed: ", mpi_error_text(rc)));
    }
    if (kind_ == CollectiveKind::kRecv) {
      int count = 0;
      MPI_Get_count(&status, mpi_type(buffer_.dtype), &count);
      if (count != buffer_.numel) {
        throw CommError(str_cat(where_, ": expected ", buffer_.numel, " ",
                                dtype_name(buffer_.dtype), " elements, received ", count));
      }
      traffic_->record(kind_, {0, static_cast<std::int64_t>(buffer_.nbytes())}, busy);
    } else {
      traffic_->record(kind_, {static_cast<std::int64_t>(buffer_.nbytes()), 0}, busy);
    }
  } catch (...) {
    error_ = std::current_exception();
  }
}

}  // namespace shardwise
