// Bytes one rank moves per operation, as bandwidth-optimal ring algorithms move them (the volume
// NCCL's bus bandwidth is quoted in). Exact integers; definitions and rounding in
// process_group.cpp. Backends record these, not what their transport happened to send.
#pragma once

#include <cstdint>
#include <mutex>

#include "shardwise/comm/process_group.hpp"

namespace shardwise {

struct TrafficVolume {
  std::int64_t sent = 0;
  std::int64_t received = 0;
};

TrafficVolume all_reduce_traffic(std::int64_t bytes, int group_size);
TrafficVolume reduce_scatter_traffic(std::int64_t input_bytes, int group_size);
TrafficVolume all_gather_traffic(std::int64_t output_bytes, int group_size);
TrafficVolume all_gather_v_traffic(std::int64_t own_bytes, std::int64_t total_bytes,
                                   int group_size);
TrafficVolume broadcast_traffic(std::int64_t bytes, int group_size, int rank, int root);

// Thread-safe per-kind accumulator behind ProcessGroup::traffic().
class TrafficRecorder {
 public:
  // `busy_seconds`: how long the operation ran (collectives: on the group's worker; send/recv:
  // from posting the request to its completion), measured by the caller: the thread that
  // records is not always the one that ran the operation.
  void record(CollectiveKind kind, TrafficVolume volume, double busy_seconds = 0);
  // Every kind is present (zero when unused), so callers can use at().
  TrafficCounters snapshot() const;
  void reset();

 private:
  mutable std::mutex mutex_;
  TrafficCounters counters_;
};

}  // namespace shardwise
