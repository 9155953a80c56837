// The one place an MPI group's collective algorithms are chosen and built: a new algorithm (or a
// backend such as NCCL behind the same interface) is its own file plus a line in each function
// here.
#include "collective_selection.hpp"

#include "collective_implementation.hpp"
#include "direct_collectives.hpp"
#include "mpi_collectives.hpp"
#include "ring_collectives.hpp"
#include "shardwise/core/error.hpp"
#include "shared_memory_collectives.hpp"

namespace shardwise {

CollectiveAlgorithm select_collective_algorithm(
    CollectiveAlgorithm requested, int group_size, std::size_t bytes,
    const std::function<bool(CollectiveAlgorithm)>& available) {
  if (group_size < 2) return CollectiveAlgorithm::kMpi;
  if (requested == CollectiveAlgorithm::kAuto && bytes < kP2PMinShardBytes) {
    return CollectiveAlgorithm::kMpi;
  }
  if (requested == CollectiveAlgorithm::kAuto || requested == CollectiveAlgorithm::kSharedMemory) {
    return available(CollectiveAlgorithm::kSharedMemory) ? CollectiveAlgorithm::kSharedMemory
                                                         : CollectiveAlgorithm::kDirect;
  }
  return requested;
}

std::unique_ptr<CollectiveImplementation> make_collective_implementation(
    CollectiveAlgorithm algorithm, const CollectiveContext& context) {
  switch (algorithm) {
    case CollectiveAlgorithm::kMpi:
      return make_mpi_collectives(context);
    case CollectiveAlgorithm::kRing:
      return make_ring_collectives(context);
    case CollectiveAlgorithm::kDirect:
      return make_direct_collectives(context);
    case CollectiveAlgorithm::kSharedMemory:
      return make_shared_memory_collectives(context);
    case CollectiveAlgorithm::kAuto:
      break;
  }
  throw InvariantError(str_cat("no collective implementation for algorithm enum ",
                               static_cast<int>(algorithm), " (kAuto is resolved first)"));
}

}  // namespace shardwise
