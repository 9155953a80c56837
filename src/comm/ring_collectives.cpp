#include "ring_collectives.hpp"

#include <algorithm>

#include "shardwise/core/error.hpp"

namespace shardwise {

namespace {

int ring_mod(int x, int p) { return ((x % p) + p) % p; }

// One ring step: sends `send` to the next rank while receiving `recv` from the previous one,
// both cut into pieces; `on_piece(offset, bytes)` runs as each received piece lands.
template <typename OnPiece>
void exchange(const PeerLinks& ring, const std::byte* send, std::byte* recv, std::size_t bytes,
              OnPiece&& on_piece) {
  const int next = ring_mod(ring.rank + 1, ring.size);
  const int prev = ring_mod(ring.rank - 1, ring.size);
  const std::size_t pieces =
      std::max<std::size_t>(1, (bytes + kRingPieceBytes - 1) / kRingPieceBytes);
  thread_local std::vector<MPI_Request> recvs;
  thread_local std::vector<MPI_Request> sends;
  recvs.assign(pieces, MPI_REQUEST_NULL);
  sends.assign(pieces, MPI_REQUEST_NULL);
  auto piece_bytes = [&](std::size_t k) {
    return static_cast<int>(std::min(kRingPieceBytes, bytes - k * kRingPieceBytes));
  };
  // Pieces on one (source, tag, communicator) arrive in the order they were posted.
  for (std::size_t k = 0; k < pieces; ++k) {
    ring.check(MPI_Irecv(recv + k * kRingPieceBytes, piece_bytes(k), MPI_BYTE, prev, 0, ring.comm,
                         &recvs[k]),
               "MPI_Irecv (ring)");
  }
  for (std::size_t k = 0; k < pieces; ++k) {
    ring.check(MPI_Isend(send + k * kRingPieceBytes, piece_bytes(k), MPI_BYTE, next, 0, ring.comm,
                         &sends[k]),
               "MPI_Isend (ring)");
  }
  for (std::size_t k = 0; k < pieces; ++k) {
    ring.wait(1, &recvs[k], prev);
    on_piece(k * kRingPieceBytes, static_cast<std::size_t>(piece_bytes(k)));
  }
  ring.wait(static_cast<int>(pieces), sends.data(), next);
}

}  // namespace

void ring_reduce_scatter(const PeerLinks& ring, const std::byte* input, std::byte* output,
                         std::size_t shard_bytes, std::size_t elem_size, ElementCombine combine,
                         std::vector<std::byte>& scratch) {
  const int p = ring.size;
  const int r = ring.rank;
  if (scratch.size() < 2 * shard_bytes) scratch.resize(2 * shard_bytes);
  std::byte* partial[2] = {scratch.data(), scratch.data() + shard_bytes};
  // Step s sends the partial sum of shard r-s-1 and receives that of shard r-s-2, to which it
  // adds its own contribution; after p-1 steps the shard received is r's, complete.
  const std::byte* send = input + static_cast<std::size_t>(ring_mod(r - 1, p)) * shard_bytes;
  for (int s = 0; s + 1 < p; ++s) {
    const std::byte* own = input + static_cast<std::size_t>(ring_mod(r - s - 2, p)) * shard_bytes;
    std::byte* received = partial[s % 2];
    std::byte* dst = s + 2 == p ? output : received;
    exchange(ring, send, received, shard_bytes, [&](std::size_t offset, std::size_t bytes) {
      combine(dst + offset, received + offset, own + offset,
              static_cast<std::int64_t>(bytes / elem_size));
    });
    send = received;
  }
}

void ring_all_gather(const PeerLinks& ring, std::byte* output, std::size_t shard_bytes) {
  const int p = ring.size;
  const int r = ring.rank;
  // Step s forwards shard r-s (this rank's own at s = 0) and receives shard r-s-1.
  for (int s = 0; s + 1 < p; ++s) {
    const std::byte* send = output + static_cast<std::size_t>(ring_mod(r - s, p)) * shard_bytes;
    std::byte* recv = output + static_cast<std::size_t>(ring_mod(r - s - 1, p)) * shard_bytes;
    exchange(ring, send, recv, shard_bytes, [](std::size_t, std::size_t) {});
  }
}

std::unique_ptr<CollectiveImplementation> make_ring_collectives(const CollectiveContext& context) {
  return std::make_unique<PeerExchangeCollectives>(context, ring_reduce_scatter, ring_all_gather);
}

}  // namespace shardwise
