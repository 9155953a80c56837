// What the point-to-point collectives (ring_collectives.hpp, direct_collectives.hpp) need from
// their process group: a communicator of their own, completion under the watchdog, error checks,
// and the element-wise reduction; and the CollectiveImplementation they share (private to the
// MPI backend).
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "collective_implementation.hpp"
#include "shardwise/comm/process_group.hpp"
#include "shardwise/core/dtype.hpp"

namespace shardwise {

// dst[i] = received[i] op own[i] for n elements; dst may alias either input exactly.
using ElementCombine = void (*)(void* dst, const void* received, const void* own, std::int64_t n);

// The combine function for `dtype` (fp32, int32, int64) and SUM (also for AVG) or MAX.
ElementCombine element_combine(DType dtype, ReduceOp op);

struct PeerLinks {
  MPI_Comm comm = MPI_COMM_NULL;  // reserved for these messages: no user send/recv can match them
  int rank = 0;
  int size = 1;
  // Completes `count` requests exchanged with group rank `peer`, under the watchdog; throws
  // CommError when MPI reports an error.
  std::function<void(int count, MPI_Request* requests, int peer)> wait;
  // Throws CommError naming `call` unless rc is MPI_SUCCESS.
  std::function<void(int rc, const char* call)> check;
};

// An algorithm made of a reduce-scatter and an all-gather over PeerLinks (the ring, the direct
// exchange). Its all_reduce is MPI's.
class PeerExchangeCollectives final : public CollectiveImplementation {
 public:
  // `scratch` grows as the reduce-scatter needs and is kept across operations.
  using ReduceScatter = void (*)(const PeerLinks& links, const std::byte* input, std::byte* output,
                                 std::size_t shard_bytes, std::size_t elem_size,
                                 ElementCombine combine, std::vector<std::byte>& scratch);
  // `output` holds the shards with this rank's already in place; fills in the others.
  using AllGather = void (*)(const PeerLinks& links, std::byte* output, std::size_t shard_bytes);

  PeerExchangeCollectives(const CollectiveContext& context, ReduceScatter reduce_scatter,
                          AllGather all_gather);

  void reduce_scatter(const ReduceScatterCall& call) override;
  void all_gather(std::byte* output, const std::byte* own_input, std::size_t shard_bytes,
                  DType dtype) override;

 private:
  PeerLinks links_;
  ReduceScatter reduce_scatter_;
  AllGather all_gather_;
  std::vector<std::byte> scratch_;  // worker thread only: received shards
};

}  // namespace shardwise
