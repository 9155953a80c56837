// Direct (pairwise) reduce-scatter and all-gather over point-to-point messages (private to the
// MPI backend): every rank sends shard q of its input straight to rank q and receives its own
// shard from every other rank, so it moves (p-1)/p of the data each way, as a ring does, but in
// one round with no chain of steps waiting on each other. Over shared memory with more ranks
// than cores that matters: a ring step stalls whenever its neighbour is descheduled.
//
// Reduction order is rank order, ((x[0] op x[1]) op x[2]) ..., the order a single process
// summing the ranks' inputs uses, independent of which rank holds the shard.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "ring_collectives.hpp"

namespace shardwise {

// Same contract as ring_reduce_scatter. Shards arrive in 256 KiB pieces, each reduced while in
// cache; `scratch` grows to 2(p-1) pieces and is kept.
void direct_reduce_scatter(const PeerLinks& links, const std::byte* input, std::byte* output,
                           std::size_t shard_bytes, std::size_t elem_size, ElementCombine combine,
                           std::vector<std::byte>& scratch);

// Same contract as ring_all_gather.
void direct_all_gather(const PeerLinks& links, std::byte* output, std::size_t shard_bytes);

// CollectiveAlgorithm::kDirect: the two above over the group's point-to-point communicator.
std::unique_ptr<CollectiveImplementation> make_direct_collectives(const CollectiveContext& context);

}  // namespace shardwise
