#include "nccl_work.hpp"

#include <chrono>

#include "nccl_status.hpp"
#include "shardwise/comm/comm_deadline.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise::nccl_detail {

NcclWork::NcclWork(std::shared_ptr<NcclGroupState> state, NcclOperation op, cudaEvent_t start,
                   cudaEvent_t end)
    : state_(std::move(state)), op_(op), start_(start), end_(end) {}

NcclWork::~NcclWork() {
  // The runtime frees an event that is still pending once it fires.
  if (start_ != nullptr) cudaEventDestroy(start_);
  if (end_ != nullptr) cudaEventDestroy(end_);
}

void NcclWork::finish_locked(std::exception_ptr error) {
  done_ = true;
  error_ = error;
  if (error) return;
  float milliseconds = 0;
  if (cudaEventElapsedTime(&milliseconds, start_, end_) == cudaSuccess) {
    state_->add_busy_seconds(op_.kind, milliseconds * 1e-3);
  }
}

bool NcclWork::poll_locked() {
  if (done_) return true;
  const cudaError_t status = cudaEventQuery(end_);
  if (status == cudaSuccess) {
    finish_locked(nullptr);
    return true;
  }
  const char* op = collective_kind_name(op_.kind);
  if (status != cudaErrorNotReady) {
    finish_locked(std::make_exception_ptr(
        CommError(str_cat(op, " #", op_.sequence, " on NCCL group ", state_->name, ": ",
                          cudaGetErrorName(status), ": ", cudaGetErrorString(status)))));
    return true;
  }
  if (state_->aborted()) {
    finish_locked(std::make_exception_ptr(CommError(str_cat(
        op, " #", op_.sequence, " on NCCL group ", state_->name,
        " did not complete: the communicator was aborted (", state_->abort_reason(), ")"))));
    return true;
  }
  const ncclResult_t async = state_->async_error();
  if (async != ncclSuccess && async != ncclInProgress) {
    const std::string reason = str_cat("NCCL reported ", ncclGetErrorString(async), " while ", op,
                                       " #", op_.sequence, " was pending");
    state_->abort(reason);
    finish_locked(std::make_exception_ptr(
        CommError(str_cat(op, " #", op_.sequence, " on NCCL group ", state_->name,
                          " failed: ", reason, "; the communicator was aborted"))));
    return true;
  }
  return false;
}

std::string NcclWork::describe_timeout(double waited_seconds) const {
  CommWaitDescription wait;
  wait.op = collective_kind_name(op_.kind);
  wait.group = state_->name;
  wait.rank = state_->rank;
  wait.world_ranks = state_->world_ranks;
  wait.sequence = op_.sequence;
  wait.peer = op_.peer;
  return comm_timeout_message(wait, waited_seconds, state_->timeout_seconds);
}

void NcclWork::wait() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!done_) {
    const auto start = std::chrono::steady_clock::now();
    const bool finished = poll_until([&] { return poll_locked(); },
                                     std::chrono::duration<double>(state_->timeout_seconds));
    if (!finished) {
      const double waited =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const std::string message = describe_timeout(waited);
      state_->abort(message);
      finish_locked(std::make_exception_ptr(
          CommError(str_cat(message, "; the NCCL communicator was aborted (ncclCommAbort)"))));
    }
  }
  if (error_) std::rethrow_exception(error_);
}

bool NcclWork::is_completed() {
  std::lock_guard<std::mutex> lock(mutex_);
  return poll_locked();
}

void NcclWork::block_stream(cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  poll_locked();
  if (error_) std::rethrow_exception(error_);
  if (done_) return;
  DeviceGuard guard(state_->device);
  check_cuda(cudaStreamWaitEvent(stream, end_, 0), "cudaStreamWaitEvent");
}

}  // namespace shardwise::nccl_detail
