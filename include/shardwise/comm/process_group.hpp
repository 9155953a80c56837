// ProcessGroup: the collective interface every layer above comm/ talks to. Operations are
// asynchronous and return a Work handle; within one group they execute in issue order, so every
// rank must issue the same sequence of collectives.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "shardwise/core/tensor_view.hpp"

namespace shardwise {

enum class ReduceOp { kSum, kAvg, kMax };

enum class CollectiveKind {
  kAllReduce,
  kReduceScatter,
  kAllGather,
  kAllGatherV,
  kBroadcast,
  kSend,
  kRecv,
  kBarrier,
};
const char* collective_kind_name(CollectiveKind kind);

// Handle to an issued operation. wait() blocks until it finished and rethrows its error (every
// time it is called). Invalid arguments found when the operation is issued (sizes, dtypes, ranks)
// are reported the same way: the returned Work is already completed and wait() throws.
// Buffers passed to an operation must stay alive and untouched until wait() returned.
class Work {
 public:
  virtual ~Work() = default;
  virtual void wait() = 0;
  virtual bool is_completed() = 0;
};
using WorkPtr = std::shared_ptr<Work>;

// Bytes one rank moved, per operation kind. Collectives are accounted with the volume a
// bandwidth-optimal (ring) algorithm moves per rank, the figure NCCL's bus bandwidth is quoted
// in, so tests and benchmarks can compare paths exactly (see process_group.cpp for the formulas).
struct TrafficCounters {
  std::map<CollectiveKind, std::int64_t> bytes_sent;
  std::map<CollectiveKind, std::int64_t> bytes_received;
  std::map<CollectiveKind, std::int64_t> calls;
  // Wall time the group's worker spent executing collectives of each kind (what the backward
  // pass can hide: a trainer compares it with the time it spent waiting).
  std::map<CollectiveKind, double> busy_seconds;

  std::int64_t total_sent() const;
  std::int64_t total_received() const;
};

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string name() const = 0;

  // In place on `buffer`.
  virtual WorkPtr all_reduce(TensorView buffer, ReduceOp op) = 0;
  // `input` holds size() equal shards; `output` (one shard) receives this rank's reduced shard.
  // In place when output aliases input's shard of this rank.
  virtual WorkPtr reduce_scatter(TensorView output, TensorView input, ReduceOp op) = 0;
  // reduce_scatter (fp32, SUM) of every rank's input multiplied by float(input_scale) first, as
  // scaling the input in place and then reduce-scattering gives (Megatron's 1/dp gradient
  // pre-scaling). Afterwards `input` outside this rank's shard holds either the scaled or the
  // original values. The default scales `input` in place, then calls reduce_scatter; a backend
  // may instead fold the scaling into its reduction (no extra pass over the buffer).
  virtual WorkPtr reduce_scatter_scaled(TensorView output, TensorView input, double input_scale);
  // `output` holds size() shards of input.numel elements; shard r comes from rank r.
  // In place when input aliases output's shard of this rank.
  virtual WorkPtr all_gather(TensorView output, TensorView input) = 0;
  // Uneven all-gather: rank r contributes counts[r] elements, concatenated in rank order.
  virtual WorkPtr all_gather_v(TensorView output, TensorView input,
                               const std::vector<std::int64_t>& counts) = 0;
  virtual WorkPtr broadcast(TensorView buffer, int root) = 0;
  virtual WorkPtr send(TensorView buffer, int peer, int tag) = 0;
  virtual WorkPtr recv(TensorView buffer, int peer, int tag) = 0;
  virtual WorkPtr barrier() = 0;

  // Every rank passes a value (e.g. a layout hash); throws CommError on every rank, naming
  // `what` and the ranks that disagree, when they are not all equal.
  virtual void check_same_on_all_ranks(std::uint64_t value, const std::string& what) = 0;

  virtual TrafficCounters traffic() const = 0;
  virtual void reset_traffic() = 0;
};
using ProcessGroupPtr = std::shared_ptr<ProcessGroup>;

// Sizes of the parallel dimensions; world = tp * pp * dp (cp folded into dp here). Expert
// parallelism splits the dp*tp ranks of a stage into ep groups; expert dp = dp * tp / (ep * etp).
struct ParallelSizes {
  int tp = 1;
  int pp = 1;
  int dp = 0;  // derived from the world size when 0
  int ep = 1;
  int etp = 0;  // expert tensor parallel; 0 = same as tp (Megatron's default)
};

// The groups one rank belongs to (Megatron's parallel_state), built by communicator splits.
// Rank order: tp fastest, then dp, then pp (Megatron's default order).
struct ParallelGroups {
  ProcessGroupPtr world;
  ProcessGroupPtr data_parallel;
  ProcessGroupPtr tensor_parallel;
  ProcessGroupPtr pipeline_parallel;
  ProcessGroupPtr expert_parallel;
  ProcessGroupPtr expert_data_parallel;
  ProcessGroupPtr expert_tensor_parallel;
  ParallelSizes sizes;  // resolved: dp and etp filled in
};

}  // namespace shardwise
