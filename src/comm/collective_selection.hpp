// Which collective algorithm runs an operation of an MPI group (private to the MPI backend; the
// rule behind CollectiveAlgorithm::kAuto, mpi_process_group.hpp).
#pragma once

#include <cstddef>
#include <functional>

#include "shardwise/comm/mpi_process_group.hpp"

namespace shardwise {

// The algorithm of a reduce_scatter, all_gather or all_reduce moving `bytes` per shard (all_reduce:
// its whole buffer) on a group of `group_size` ranks that asked for `requested`. `available(a)`
// says whether `a` can run on the group; it is asked only for kSharedMemory and only when that is
// the choice, since setting up a segment is collective (every rank asks at the same point).
// An algorithm without an all_reduce of its own leaves all_reduce to kMpi.
CollectiveAlgorithm select_collective_algorithm(
    CollectiveAlgorithm requested, int group_size, std::size_t bytes,
    const std::function<bool(CollectiveAlgorithm)>& available);

}  // namespace shardwise
