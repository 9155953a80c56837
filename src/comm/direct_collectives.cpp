#include "direct_collectives.hpp"

#include <algorithm>
#include <cstring>

#include "rank_order_reduce.hpp"

namespace shardwise {

namespace {

// Pieces of at most this many bytes keep every MPI count an int.
constexpr std::size_t kMaxMessageBytes = std::size_t{1} << 30;
// Reduce-scatter receives each peer's shard in pieces of this size, reduced while they are still
// in cache: the data crosses memory once instead of being copied to scratch and read back.
constexpr std::size_t kPieceBytes = 256 << 10;

void post(const PeerLinks& links, bool send, std::byte* data, std::size_t bytes, int peer,
          std::vector<MPI_Request>& requests) {
  std::size_t offset = 0;
  do {
    const int n = static_cast<int>(std::min(kMaxMessageBytes, bytes - offset));
    MPI_Request request = MPI_REQUEST_NULL;
    if (send) {
      links.check(MPI_Isend(data + offset, n, MPI_BYTE, peer, 0, links.comm, &request),
                  "MPI_Isend (direct)");
    } else {
      links.check(MPI_Irecv(data + offset, n, MPI_BYTE, peer, 0, links.comm, &request),
                  "MPI_Irecv (direct)");
    }
    requests.push_back(request);
    offset += static_cast<std::size_t>(n);
  } while (offset < bytes);
}

// Completes the requests of every peer in rank order, naming the peer a wait is stuck on.
void wait_per_peer(const PeerLinks& links, std::vector<MPI_Request>& requests,
                   const std::vector<std::size_t>& first) {
  for (int q = 0, k = 0; q < links.size; ++q) {
    if (q == links.rank) continue;
    const std::size_t begin = first[static_cast<std::size_t>(k)];
    const std::size_t end = static_cast<std::size_t>(k) + 1 < first.size()
                                ? first[static_cast<std::size_t>(k) + 1]
                                : requests.size();
    links.wait(static_cast<int>(end - begin), requests.data() + begin, q);
    ++k;
  }
}

}  // namespace

void direct_reduce_scatter(const PeerLinks& links, const std::byte* input, std::byte* output,
                           std::size_t shard_bytes, std::size_t elem_size, ElementCombine combine,
                           std::vector<std::byte>& scratch) {
  const int p = links.size;
  const int r = links.rank;
  const std::size_t stride = std::max<std::size_t>(1, std::min(kPieceBytes, shard_bytes));
  const std::size_t pieces = std::max<std::size_t>(1, (shard_bytes + stride - 1) / stride);
  auto piece_bytes = [&](std::size_t k) { return std::min(stride, shard_bytes - k * stride); };
  // Two sets of p-1 piece buffers: one being reduced while the next set is received.
  const std::size_t set_bytes = static_cast<std::size_t>(p - 1) * stride;
  if (scratch.size() < 2 * set_bytes) scratch.resize(2 * set_bytes);
  auto index = [&](int q) { return static_cast<std::size_t>(q < r ? q : q - 1); };
  auto buffer = [&](std::size_t k, int q) {
    return scratch.data() + (k % 2) * set_bytes + index(q) * stride;
  };
  auto shard_of = [&](int q) {
    return const_cast<std::byte*>(input) + static_cast<std::size_t>(q) * shard_bytes;
  };
  thread_local std::vector<MPI_Request> sends;
  thread_local std::vector<MPI_Request> recvs[2];
  sends.clear();
  // Every piece of every other shard goes out at once (rank r+1 first, so not every rank sends
  // to rank 0 first); pieces from one peer arrive in the order they were sent.
  for (int j = 1; j < p; ++j) {
    const int q = (r + j) % p;
    for (std::size_t k = 0; k < pieces; ++k) {
      post(links, true, shard_of(q) + k * stride, piece_bytes(k), q, sends);
    }
  }
  auto post_recvs = [&](std::size_t k) {
    recvs[k % 2].clear();
    for (int q = 0; q < p; ++q) {
      if (q != r) post(links, false, buffer(k, q), piece_bytes(k), q, recvs[k % 2]);
    }
  };
  post_recvs(0);
  if (pieces > 1) post_recvs(1);
  for (std::size_t k = 0; k < pieces; ++k) {
    for (int q = 0; q < p; ++q) {
      if (q != r) links.wait(1, &recvs[k % 2][index(q)], q);
    }
    reduce_in_rank_order(
        p, piece_bytes(k), elem_size, combine, 1.0f,
        [&](int q) -> const std::byte* { return q == r ? shard_of(r) + k * stride : buffer(k, q); },
        output + k * stride);
    if (k + 2 < pieces) post_recvs(k + 2);
  }
  links.wait(static_cast<int>(sends.size()), sends.data(), (r + 1) % p);
}

void direct_all_gather(const PeerLinks& links, std::byte* output, std::size_t shard_bytes) {
  const int p = links.size;
  const int r = links.rank;
  thread_local std::vector<MPI_Request> recvs, sends;
  thread_local std::vector<std::size_t> recv_first;
  recvs.clear(), sends.clear(), recv_first.clear();
  std::byte* own = output + static_cast<std::size_t>(r) * shard_bytes;
  for (int q = 0; q < p; ++q) {
    if (q == r) continue;
    recv_first.push_back(recvs.size());
    post(links, false, output + static_cast<std::size_t>(q) * shard_bytes, shard_bytes, q, recvs);
  }
  for (int k = 1; k < p; ++k) post(links, true, own, shard_bytes, (r + k) % p, sends);
  wait_per_peer(links, recvs, recv_first);
  links.wait(static_cast<int>(sends.size()), sends.data(), (r + 1) % p);
}

std::unique_ptr<CollectiveImplementation> make_direct_collectives(
    const CollectiveContext& context) {
  return std::make_unique<PeerExchangeCollectives>(context, direct_reduce_scatter,
                                                   direct_all_gather);
}

}  // namespace shardwise
