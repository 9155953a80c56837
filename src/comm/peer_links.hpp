// What the point-to-point collectives (ring_collectives.hpp, direct_collectives.hpp) need from
// their process group: a communicator of their own, completion under the watchdog, error checks,
// and the element-wise reduction (private to the MPI backend).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <functional>

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

}  // namespace shardwise
