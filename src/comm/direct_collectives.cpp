#include "direct_collectives.hpp"

#include <algorithm>
#include <cstring>

namespace shardwise {

namespace {

// Pieces of at most this many bytes keep every MPI count an int.
constexpr std::size_t kMaxMessageBytes = std::size_t{1} << 30;
// Elements reduced per block: the partial sums of a block stay in L1 while each rank's shard
// streams through once.
constexpr std::size_t kBlockBytes = 16 << 10;

void post(const RingLinks& links, bool send, std::byte* data, std::size_t bytes, int peer,
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
void wait_per_peer(const RingLinks& links, std::vector<MPI_Request>& requests,
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

void direct_reduce_scatter(const RingLinks& links, const std::byte* input, std::byte* output,
                           std::size_t shard_bytes, std::size_t elem_size, RingCombine combine,
                           std::vector<std::byte>& scratch) {
  const int p = links.size;
  const int r = links.rank;
  if (scratch.size() < static_cast<std::size_t>(p - 1) * shard_bytes) {
    scratch.resize(static_cast<std::size_t>(p - 1) * shard_bytes);
  }
  auto slot = [&](int q) { return scratch.data() + static_cast<std::size_t>(q < r ? q : q - 1) * shard_bytes; };
  auto shard_of = [&](int q) {
    return const_cast<std::byte*>(input) + static_cast<std::size_t>(q) * shard_bytes;
  };
  thread_local std::vector<MPI_Request> recvs, sends;
  thread_local std::vector<std::size_t> recv_first, send_first;
  recvs.clear(), sends.clear(), recv_first.clear(), send_first.clear();
  for (int q = 0; q < p; ++q) {
    if (q == r) continue;
    recv_first.push_back(recvs.size());
    post(links, false, slot(q), shard_bytes, q, recvs);
  }
  for (int k = 1; k < p; ++k) {  // rank r+1 first, so not every rank sends to rank 0 first
    const int q = (r + k) % p;
    send_first.push_back(sends.size());
    post(links, true, shard_of(q), shard_bytes, q, sends);
  }
  wait_per_peer(links, recvs, recv_first);
  // Rank order, one block at a time; the own shard is read before its block of the output is
  // written, so the output may be that shard.
  alignas(64) thread_local std::byte acc[kBlockBytes];
  const std::size_t block = kBlockBytes / elem_size * elem_size;
  for (std::size_t offset = 0; offset < shard_bytes; offset += block) {
    const std::size_t bytes = std::min(block, shard_bytes - offset);
    const auto n = static_cast<std::int64_t>(bytes / elem_size);
    std::memcpy(acc, (r == 0 ? shard_of(0) : slot(0)) + offset, bytes);
    for (int q = 1; q < p; ++q) combine(acc, acc, (q == r ? shard_of(q) : slot(q)) + offset, n);
    std::memcpy(output + offset, acc, bytes);
  }
  // Sends were posted in rotated order; complete them all (any order).
  links.wait(static_cast<int>(sends.size()), sends.data(), (r + 1) % p);
}

void direct_all_gather(const RingLinks& links, std::byte* output, std::size_t shard_bytes) {
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

}  // namespace shardwise
