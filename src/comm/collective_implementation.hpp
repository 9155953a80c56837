// The interface every collective algorithm of the MPI backend implements (private to the
// backend). Each algorithm is one class in a file of its own (mpi_collectives, ring_collectives,
// direct_collectives, shared_memory_collectives); collective_selection.cpp is the one place that
// picks an algorithm for an operation and builds it. The process group keeps what every algorithm
// shares: argument checks, the worker thread, fp32 staging of 16-bit types, AVG's division,
// traffic accounting and the watchdog's bookkeeping. See docs/collectives.md.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "shardwise/comm/comm_deadline.hpp"
#include "shardwise/comm/mpi_process_group.hpp"
#include "shardwise/comm/symmetric_memory.hpp"
#include "shardwise/core/dtype.hpp"

namespace shardwise {

// What an algorithm gets from its group. Every callback runs on the group's worker thread, as
// the algorithms do.
struct CollectiveContext {
  MPI_Comm comm = MPI_COMM_NULL;      // the group's communicator (MPI's own collectives)
  MPI_Comm p2p_comm = MPI_COMM_NULL;  // a duplicate reserved for the algorithms' own messages
  int rank = 0;
  int size = 1;
  std::string group_name;
  // Runs one non-blocking MPI call (`post` fills the request) to completion under the watchdog;
  // throws CommError naming `call` when MPI reports an error.
  std::function<void(const char* call, const std::function<int(MPI_Request*)>& post)> complete;
  // Completes `count` requests exchanged with group rank `peer` under the watchdog (CommError on
  // failure).
  std::function<void(int count, MPI_Request* requests, int peer)> wait;
  // Throws CommError naming `call` unless rc is MPI_SUCCESS.
  std::function<void(int rc, const char* call)> check;
  // The watchdog's timeout now, and what it reports about a wait for group rank `peer`.
  std::function<double()> timeout_seconds;
  std::function<CommWaitDescription(int peer)> describe;
};

// One reduce-scatter: `input` holds `size` shards of `shard_bytes`; `output` receives this rank's
// reduced shard and is either disjoint from input or exactly its shard of this rank (`in_place`).
struct ReduceScatterCall {
  const std::byte* input = nullptr;
  std::byte* output = nullptr;
  std::size_t shard_bytes = 0;
  DType dtype = DType::kFloat32;  // fp32, int32 or int64 (16-bit types arrive staged as fp32)
  ReduceOp op = ReduceOp::kSum;   // AVG reduces as SUM: the group divides afterwards
  bool in_place = false;
  float input_scale = 1.0f;  // != 1 only for fp32 SUM on an algorithm that folds_input_scale()
};

class CollectiveImplementation {
 public:
  explicit CollectiveImplementation(CollectiveContext context) : context_(std::move(context)) {}
  virtual ~CollectiveImplementation() = default;
  CollectiveImplementation(const CollectiveImplementation&) = delete;
  CollectiveImplementation& operator=(const CollectiveImplementation&) = delete;

  virtual void reduce_scatter(const ReduceScatterCall& call) = 0;
  // Whether reduce_scatter multiplies each rank's input by call.input_scale itself; otherwise
  // the group scales the input in place first.
  virtual bool folds_input_scale() const { return false; }
  // Whether large all-gathers copy straight from the peers' memory (one copy per byte).
  virtual bool single_copy_all_gather() const { return false; }
  // Memory every rank maps, on which this algorithm's reduce_scatter and all_gather run in place
  // (shardwise/comm/symmetric_memory.hpp); null when it has none. Collective over the group.
  virtual SymmetricMemoryPtr allocate_symmetric(std::size_t /*bytes*/) { return nullptr; }
  // Reduce-scatter of `size` fp32 shards of `shard` elements that may be clobbered (the fp32
  // stage of a 16-bit input); returns where this rank's reduced shard is inside `data`. The
  // default reduces in place into this rank's shard.
  virtual float* reduce_scatter_staged(float* data, std::int64_t shard, ReduceOp op);
  // `output` holds `size` shards of `shard_bytes`; fills the others' shards in. This rank's is
  // `own_input`, or already in place in `output` when own_input is null.
  virtual void all_gather(std::byte* output, const std::byte* own_input, std::size_t shard_bytes,
                          DType dtype) = 0;
  // In place over `numel` elements (dtypes as reduce_scatter). Returns false without touching
  // `data` when the algorithm has no all_reduce of its own: the group then runs MPI's.
  virtual bool all_reduce(std::byte* data, std::int64_t numel, DType dtype, ReduceOp op);

 protected:
  const CollectiveContext& context() const { return context_; }

 private:
  CollectiveContext context_;
};

// Builds `algorithm` (not kAuto) for a group; null when it cannot run there (shared memory
// without a segment every rank mapped). Collective over the group: every rank calls it at the
// same point. Defined in collective_selection.cpp, next to the rule that picks the algorithm.
std::unique_ptr<CollectiveImplementation> make_collective_implementation(
    CollectiveAlgorithm algorithm, const CollectiveContext& context);

}  // namespace shardwise
