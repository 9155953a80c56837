#include "nccl_group_state.hpp"

#include <chrono>

#include "shardwise/comm/comm_deadline.hpp"

namespace shardwise {

NcclGroupState::~NcclGroupState() {
  // Destructors do not throw: statuses are ignored here. A live communicator is destroyed once
  // its queued operations finished; one whose operations do not finish within the timeout (a
  // peer that is gone) is aborted instead, so shutting down never hangs.
  if (comm != nullptr && !aborted()) {
    const bool drained = stream == nullptr ||
                         poll_until([&] { return cudaStreamQuery(stream) != cudaErrorNotReady; },
                                    std::chrono::duration<double>(timeout_seconds));
    if (drained) {
      ncclCommDestroy(comm);
    } else {
      ncclCommAbort(comm);
    }
  }
  if (ready != nullptr) cudaEventDestroy(ready);
  if (barrier_scratch != nullptr) cudaFree(barrier_scratch);
  if (stream != nullptr) cudaStreamDestroy(stream);
}

void NcclGroupState::abort(const std::string& reason) {
  std::lock_guard<std::mutex> issue_lock(issue_mutex);
  if (aborted_.load()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    abort_reason_ = reason;
  }
  aborted_.store(true);
  if (comm != nullptr) ncclCommAbort(comm);
}

std::string NcclGroupState::abort_reason() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return abort_reason_;
}

ncclResult_t NcclGroupState::async_error() {
  std::lock_guard<std::mutex> issue_lock(issue_mutex);
  if (aborted_.load() || comm == nullptr) return ncclSuccess;
  ncclResult_t async = ncclSuccess;
  const ncclResult_t query = ncclCommGetAsyncError(comm, &async);
  return query != ncclSuccess ? query : async;
}

void NcclGroupState::record_issue(CollectiveKind kind, TrafficVolume volume) {
  recorder_.record(kind, volume, 0.0);
}

void NcclGroupState::add_busy_seconds(CollectiveKind kind, double seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  busy_[kind] += seconds;
}

TrafficCounters NcclGroupState::traffic() const {
  TrafficCounters counters = recorder_.snapshot();
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [kind, seconds] : busy_) counters.busy_seconds[kind] += seconds;
  return counters;
}

void NcclGroupState::reset_traffic() {
  recorder_.reset();
  std::lock_guard<std::mutex> lock(mutex_);
  busy_.clear();
}

}  // namespace shardwise
