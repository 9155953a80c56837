// Bandwidth-optimal ring reduce-scatter and all-gather over point-to-point messages (private to
// the MPI backend). Each rank sends and receives (p-1)/p of the data, the least any algorithm
// can; Open MPI 4.1's MPI_Reduce_scatter_block instead reduces everything to one rank and
// scatters it. Messages are cut into 1 MiB pieces, each reduced as soon as it lands, which also
// keeps every MPI count an int. kSharedMemory (one node) or kDirect is the default; the ring is
// kept as an option for fabrics where neighbour-only traffic pays.
//
// Reduction order is fixed by the ring: shard c is reduced as
// ((x[c+1] op x[c+2]) op ...) op x[c] (ranks mod p), the same on every run.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "peer_links.hpp"

namespace shardwise {

// Bytes per message piece.
inline constexpr std::size_t kRingPieceBytes = std::size_t{1} << 20;

// `input` holds size shards of `shard_bytes`; `output` (one shard, may be exactly input's shard
// of this rank) receives the reduced shard of this rank. `scratch` grows to 2 shards and is kept.
void ring_reduce_scatter(const PeerLinks& ring, const std::byte* input, std::byte* output,
                         std::size_t shard_bytes, std::size_t elem_size, ElementCombine combine,
                         std::vector<std::byte>& scratch);

// `output` holds size shards of `shard_bytes` with this rank's shard already in place; fills in
// the others.
void ring_all_gather(const PeerLinks& ring, std::byte* output, std::size_t shard_bytes);

// CollectiveAlgorithm::kRing: the two above over the group's point-to-point communicator.
std::unique_ptr<CollectiveImplementation> make_ring_collectives(const CollectiveContext& context);

}  // namespace shardwise
