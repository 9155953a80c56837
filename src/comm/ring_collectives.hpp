// Bandwidth-optimal ring reduce-scatter and all-gather over point-to-point messages (private to
// the MPI backend). Each rank sends and receives (p-1)/p of the data, the least any algorithm
// can; Open MPI 4.1's MPI_Reduce_scatter_block instead reduces everything to one rank and
// scatters it. Messages are cut into pieces so the reduction of one piece overlaps the transfer
// of the next, and each piece stays far below MPI's int count limit.
//
// Reduction order is fixed by the ring: shard c is reduced as
// ((x[c+1] op x[c+2]) op ...) op x[c] (ranks mod p), the same on every run.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "shardwise/comm/process_group.hpp"
#include "shardwise/core/dtype.hpp"

namespace shardwise {

// dst[i] = received[i] op own[i] for n elements; dst may alias either input exactly.
using RingCombine = void (*)(void* dst, const void* received, const void* own, std::int64_t n);

// The combine function for `dtype` (fp32, int32, int64) and SUM (also for AVG) or MAX.
RingCombine ring_combine(DType dtype, ReduceOp op);

struct RingLinks {
  MPI_Comm comm = MPI_COMM_NULL;  // reserved for ring messages: no user send/recv can match them
  int rank = 0;
  int size = 1;
  // Completes `count` requests exchanged with group rank `peer`, under the watchdog; throws
  // CommError when MPI reports an error.
  std::function<void(int count, MPI_Request* requests, int peer)> wait;
  // Throws CommError naming `call` unless rc is MPI_SUCCESS.
  std::function<void(int rc, const char* call)> check;
};

// Bytes per message piece.
inline constexpr std::size_t kRingPieceBytes = std::size_t{1} << 20;

// `input` holds size shards of `shard_bytes`; `output` (one shard, may be exactly input's shard
// of this rank) receives the reduced shard of this rank. `scratch` grows to 2 shards and is kept.
void ring_reduce_scatter(const RingLinks& ring, const std::byte* input, std::byte* output,
                         std::size_t shard_bytes, std::size_t elem_size, RingCombine combine,
                         std::vector<std::byte>& scratch);

// `output` holds size shards of `shard_bytes` with this rank's shard already in place; fills in
// the others.
void ring_all_gather(const RingLinks& ring, std::byte* output, std::size_t shard_bytes);

}  // namespace shardwise
