// CollectiveAlgorithm::kMpi: the MPI library's own non-blocking collectives (private to the MPI
// backend). Every operation works on any group size and shard size, so this is also where the
// other algorithms' small shards and their missing all_reduce go. all_reduce is issued in chunks
// of 2^30 elements (MPI counts are int), so its buffer has no size limit.
#pragma once

#include <memory>

#include "collective_implementation.hpp"

namespace shardwise {

std::unique_ptr<CollectiveImplementation> make_mpi_collectives(const CollectiveContext& context);

}  // namespace shardwise
