// Kind names, traffic totals and the traffic model.
//
// Traffic is the per-rank volume of bandwidth-optimal ring algorithms over a group of p ranks,
// in bytes of the caller's buffer dtype (a bf16 reduction that stages through fp32 still counts
// bf16 bytes: the model describes the operation, not the staging). p = 1 moves nothing.
//   all_reduce of N bytes        sent = received = 2(p-1)N/p   (reduce-scatter + all-gather ring;
//                                 rounded down to whole bytes, exact when p divides N)
//   reduce_scatter, input N      sent = received = (p-1)N/p    (exact: N = p * shard)
//   all_gather, output N         sent = received = (p-1)N/p    (exact: N = p * shard)
//   all_gather_v, own n_r of T   sent = n_r (p-1), received = T - n_r  (each block goes to the
//                                 p-1 other ranks; equals all_gather when the counts are equal)
//   broadcast of N from root     a pipelined chain root, root+1, ..., root+p-1 (mod p): every
//                                 rank but the root receives N, every rank but the last sends N
//   send / recv                  the message bytes, on the sending / receiving side
//   barrier                      no bytes (counted in calls)
#include "shardwise/comm/ordered_worker.hpp"
#include "shardwise/comm/traffic_model.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise {

namespace {
constexpr CollectiveKind kAllKinds[] = {
    CollectiveKind::kAllReduce,  CollectiveKind::kReduceScatter, CollectiveKind::kAllGather,
    CollectiveKind::kAllGatherV, CollectiveKind::kBroadcast,     CollectiveKind::kSend,
    CollectiveKind::kRecv,       CollectiveKind::kBarrier,
};

void require_group_size(int group_size) { SW_CHECK(group_size >= 1, "group size ", group_size); }
}  // namespace

const char* collective_kind_name(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllReduce:
      return "all_reduce";
    case CollectiveKind::kReduceScatter:
      return "reduce_scatter";
    case CollectiveKind::kAllGather:
      return "all_gather";
    case CollectiveKind::kAllGatherV:
      return "all_gather_v";
    case CollectiveKind::kBroadcast:
      return "broadcast";
    case CollectiveKind::kSend:
      return "send";
    case CollectiveKind::kRecv:
      return "recv";
    case CollectiveKind::kBarrier:
      return "barrier";
  }
  return "unknown";
}

WorkPtr ProcessGroup::reduce_scatter_scaled(TensorView output, TensorView input,
                                            double input_scale) {
  if (input.dtype != DType::kFloat32) {
    return finished_work(std::make_exception_ptr(
        InvalidArgument(str_cat("reduce_scatter_scaled on group ", name(), ": input is ",
                                dtype_name(input.dtype), ", expected fp32"))));
  }
  if (input.on_device()) {
    return finished_work(std::make_exception_ptr(InvalidArgument(
        str_cat("reduce_scatter_scaled on group ", name(), ": input lives on CUDA device ",
                input.device, "; the default implementation scales host memory only"))));
  }
  if (input_scale != 1.0) {
    const float f = static_cast<float>(input_scale);
    float* data = input.as<float>();
    for (std::int64_t i = 0; i < input.numel; ++i) data[i] *= f;
  }
  return reduce_scatter(output, input, ReduceOp::kSum);
}

std::int64_t TrafficCounters::total_sent() const {
  std::int64_t total = 0;
  for (const auto& [kind, bytes] : bytes_sent) total += bytes;
  return total;
}

std::int64_t TrafficCounters::total_received() const {
  std::int64_t total = 0;
  for (const auto& [kind, bytes] : bytes_received) total += bytes;
  return total;
}

TrafficVolume all_reduce_traffic(std::int64_t bytes, int group_size) {
  require_group_size(group_size);
  const std::int64_t moved = 2 * (group_size - 1) * bytes / group_size;
  return {moved, moved};
}

TrafficVolume reduce_scatter_traffic(std::int64_t input_bytes, int group_size) {
  require_group_size(group_size);
  const std::int64_t moved = (group_size - 1) * input_bytes / group_size;
  return {moved, moved};
}

TrafficVolume all_gather_traffic(std::int64_t output_bytes, int group_size) {
  require_group_size(group_size);
  const std::int64_t moved = (group_size - 1) * output_bytes / group_size;
  return {moved, moved};
}

TrafficVolume all_gather_v_traffic(std::int64_t own_bytes, std::int64_t total_bytes,
                                   int group_size) {
  require_group_size(group_size);
  return {own_bytes * (group_size - 1), total_bytes - own_bytes};
}

TrafficVolume broadcast_traffic(std::int64_t bytes, int group_size, int rank, int root) {
  require_group_size(group_size);
  const int last = (root + group_size - 1) % group_size;
  return {rank == last ? 0 : bytes, rank == root ? 0 : bytes};
}

void TrafficRecorder::record(CollectiveKind kind, TrafficVolume volume, double busy_seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  counters_.busy_seconds[kind] += busy_seconds;
  counters_.bytes_sent[kind] += volume.sent;
  counters_.bytes_received[kind] += volume.received;
  counters_.calls[kind] += 1;
}

TrafficCounters TrafficRecorder::snapshot() const {
  std::lock_guard<std::mutex> lock(mutex_);
  TrafficCounters out = counters_;
  for (CollectiveKind kind : kAllKinds) {
    out.bytes_sent.try_emplace(kind, 0);
    out.bytes_received.try_emplace(kind, 0);
    out.calls.try_emplace(kind, 0);
    out.busy_seconds.try_emplace(kind, 0.0);
  }
  return out;
}

void TrafficRecorder::reset() {
  std::lock_guard<std::mutex> lock(mutex_);
  counters_ = TrafficCounters{};
}

}  // namespace shardwise
