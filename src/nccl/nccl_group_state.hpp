// What an NCCL group and the Work it hands out share (private to shardwise_nccl): the
// communicator, its streams, the abort flag and the traffic figures. Works hold it by shared_ptr,
// so a Work outlives neither its events nor its communicator.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "shardwise/comm/process_group.hpp"
#include "shardwise/comm/traffic_model.hpp"

namespace shardwise {

struct NcclGroupState {
  ~NcclGroupState();

  // ncclCommAbort once (later calls return at once); `reason` is what later operations report.
  void abort(const std::string& reason);
  bool aborted() const { return aborted_.load(); }
  std::string abort_reason() const;
  // ncclCommGetAsyncError of the communicator (ncclSuccess once it was aborted: callers report
  // the abort itself). Serialised with abort(), which frees the communicator.
  ncclResult_t async_error();

  // Bytes and calls are recorded when an operation is issued, its GPU time when a wait sees it
  // complete (the events' elapsed time).
  void record_issue(CollectiveKind kind, TrafficVolume volume);
  void add_busy_seconds(CollectiveKind kind, double seconds);
  TrafficCounters traffic() const;
  void reset_traffic();

  ProcessGroupPtr host;
  std::string name;
  int rank = 0;
  int size = 1;
  int device = 0;
  std::vector<int> world_ranks;  // world rank of each group rank (for the watchdog's message)
  double timeout_seconds = 0;

  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;          // NCCL runs here
  cudaStream_t compute_stream = nullptr;  // operations wait for what is queued here
  cudaEvent_t ready = nullptr;            // recorded on compute_stream at each issue
  float* barrier_scratch = nullptr;       // one device float all-reduced by barrier()

  std::mutex issue_mutex;      // NCCL calls and abort run one at a time, in issue order
  std::uint64_t sequence = 0;  // operations issued so far (under issue_mutex)

 private:
  std::atomic<bool> aborted_{false};
  mutable std::mutex mutex_;  // abort_reason_, busy_
  std::string abort_reason_;
  TrafficRecorder recorder_;
  std::map<CollectiveKind, double> busy_;
};

}  // namespace shardwise
