// The Work of an NCCL group's operation (private to shardwise_nccl): complete when the CUDA event
// recorded after the operation on the group's stream has fired. wait() polls that event and the
// communicator's asynchronous error under the group's timeout (the watchdog): past it, the
// communicator is aborted and wait() throws CommError naming the group, operation and timeout.
#pragma once

#include <cuda_runtime_api.h>

#include <exception>
#include <memory>
#include <mutex>
#include <string>

#include "nccl_group_state.hpp"
#include "shardwise/comm/process_group.hpp"

namespace shardwise::nccl_detail {

struct NcclOperation {
  CollectiveKind kind = CollectiveKind::kBarrier;
  std::uint64_t sequence = 0;  // 1-based number of the operation on its group
  int peer = -1;               // send / recv: the other group rank
};

class NcclWork : public Work {
 public:
  // Takes ownership of `start` and `end`, recorded around the operation on the group's stream.
  NcclWork(std::shared_ptr<NcclGroupState> state, NcclOperation op, cudaEvent_t start,
           cudaEvent_t end);
  ~NcclWork() override;
  NcclWork(const NcclWork&) = delete;
  NcclWork& operator=(const NcclWork&) = delete;

  void wait() override;
  bool is_completed() override;
  // Makes `stream` wait for the operation on the GPU; rethrows its error when already known.
  void block_stream(cudaStream_t stream);

 private:
  // One look at the event and the communicator; true once the outcome is known (done_ set).
  bool poll_locked();
  void finish_locked(std::exception_ptr error);
  std::string describe_timeout(double waited_seconds) const;

  std::shared_ptr<NcclGroupState> state_;
  NcclOperation op_;
  cudaEvent_t start_ = nullptr;
  cudaEvent_t end_ = nullptr;
  std::mutex mutex_;
  bool done_ = false;
  std::exception_ptr error_;
};

}  // namespace shardwise::nccl_detail
