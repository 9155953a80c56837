// The symmetric-memory side of SharedMemoryCollectives (shared_memory_collectives.hpp): the
// allocation, and the in-place reduce-scatter, all-gather and all-reduce on it. Each runs in one
// round of the group's counters and returns once every peer has read this rank's buffer.
#include <sys/mman.h>

#include <algorithm>
#include <cstring>

#include "rank_order_reduce.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/core/logging.hpp"
#include "shardwise/core/streaming_copy.hpp"
#include "shared_memory_collectives.hpp"

namespace shardwise {

SymmetricMemoryPtr SharedMemoryCollectives::allocate_symmetric(
    MPI_Comm comm, std::size_t bytes, const CollectiveCompletion& complete) {
  const std::size_t stride = symmetric_stride(bytes);
  const std::size_t length = stride * static_cast<std::size_t>(size_);
  std::string why;
  // Each rank reserves its own allocation: its pages land where it runs (NUMA first touch).
  const SegmentPart own{static_cast<std::size_t>(rank_) * stride, stride};
  void* base = share_segment(comm, rank_, length, own, complete, why);
  // Once per group: DDP allocates two buffers per buffer key, and the cause (a full /dev/shm,
  // say) is the same for all of them.
  if (!why.empty() && !reported_symmetric_fallback_) {
    reported_symmetric_fallback_ = true;
    log::warning("group ", group_name_, ": symmetric memory of ", bytes,
                 " bytes per rank unavailable (", why,
                 "); using private memory (not reported again for this group)");
  }
  if (base == nullptr) return nullptr;
  auto* segment = static_cast<std::byte*>(base);
  const std::uint64_t id = regions_->add(segment, stride, bytes, rank_);
  std::shared_ptr<void> owner(base, [regions = regions_, id, length](void* mapping) {
    regions->remove(id);
    ::munmap(mapping, length);
  });
  return std::make_shared<SymmetricMemory>(segment + static_cast<std::size_t>(rank_) * stride,
                                           bytes, true, std::move(owner));
}

void SharedMemoryCollectives::require_same_placement(int q, const SymmetricPlacement& mine,
                                                     const char* what) const {
  const std::uint64_t allocation = flags(q).allocation.load(std::memory_order_relaxed);
  const std::uint64_t offset = flags(q).offset.load(std::memory_order_relaxed);
  if (allocation == mine.allocation && (allocation == 0 || offset == mine.offset)) return;
  auto describe = [](std::uint64_t id, std::uint64_t at) {
    return id == 0 ? std::string("is in ordinary memory")
                   : str_cat("is at byte ", at, " of symmetric allocation ", id);
  };
  throw CommError(str_cat(what, " on group ", group_name_, ": rank ", rank_, "'s buffer ",
                          describe(mine.allocation, mine.offset), " but rank ", q, "'s ",
                          describe(allocation, offset),
                          "; every rank must pass the same symmetric allocation at the same "
                          "offset, or ordinary memory"));
}

void SharedMemoryCollectives::require_peers_same_placement(const SymmetricPlacement& mine,
                                                           const char* what) const {
  for (int q = 0; q < size_; ++q) {
    if (q != rank_) require_same_placement(q, mine, what);
  }
}

void SharedMemoryCollectives::reduce_scatter_in_place(const SymmetricPlacement& input,
                                                      std::byte* output, std::size_t shard_bytes,
                                                      std::size_t elem_size, ElementCombine combine,
                                                      float input_scale,
                                                      const SharedMemoryWatch& watch) {
  const int r = rank_;
  // The peers read this rank's flags of the previous round until they finish it.
  wait_all(&RankFlags::done, round_, watch);
  publish(2 * round_ + 2, input);
  wait_all(&RankFlags::ready, 2 * round_ + 1, watch);
  require_peers_same_placement(input, "reduce_scatter");
  const std::size_t own_shard = static_cast<std::size_t>(r) * shard_bytes;
  reduce_in_rank_order(
      size_, shard_bytes, elem_size, combine, input_scale,
      [&](int q) { return input.on_rank(q) + own_shard; }, output);
  finish_round();
  // The caller may change its input once this returns: every peer must have read it.
  wait_all(&RankFlags::done, round_, watch);
}

void SharedMemoryCollectives::all_gather_in_place(const SymmetricPlacement& at, std::byte* output,
                                                  const std::byte* own_input,
                                                  std::size_t shard_bytes,
                                                  const SharedMemoryWatch& watch) {
  const int r = rank_;
  const std::size_t output_bytes = shard_bytes * static_cast<std::size_t>(size_);
  wait_all(&RankFlags::done, round_, watch);
  if (own_input != nullptr) {
    copy_into_output(output + static_cast<std::size_t>(r) * shard_bytes, own_input, shard_bytes,
                     output_bytes);
  }
  publish(2 * round_ + 2, at);
  for (int j = 1; j < size_; ++j) {
    const int q = (r + j) % size_;
    wait_one(flags(q).ready, 2 * round_ + 1, q, watch);
    require_same_placement(q, at, "all_gather");
    const std::size_t shard = static_cast<std::size_t>(q) * shard_bytes;
    copy_into_output(output + shard, at.on_rank(q) + shard, shard_bytes, output_bytes);
  }
  finish_round();
  wait_all(&RankFlags::done, round_, watch);
}

void SharedMemoryCollectives::all_reduce_in_place(const SymmetricPlacement& at, std::byte* data,
                                                  std::size_t numel, std::size_t elem_size,
                                                  ElementCombine combine,
                                                  const SharedMemoryWatch& watch) {
  const int p = size_;
  const int r = rank_;
  // Rank q reduces bytes [part(q), part(q + 1)) of every rank's buffer into its own, then every
  // rank copies each part from the rank that reduced it.
  auto part = [&](int q) {
    return numel * static_cast<std::size_t>(q) / static_cast<std::size_t>(p) * elem_size;
  };
  wait_all(&RankFlags::done, round_, watch);
  publish(2 * round_ + 1, at);
  wait_all(&RankFlags::ready, 2 * round_ + 1, watch);
  require_peers_same_placement(at, "all_reduce");
  const std::size_t lo = part(r);
  reduce_in_rank_order(
      p, part(r + 1) - lo, elem_size, combine, 1.0f, [&](int q) { return at.on_rank(q) + lo; },
      data + lo);
  publish(2 * round_ + 2, at);
  for (int j = 1; j < p; ++j) {
    const int q = (r + j) % p;
    // Rank q has reduced its part: it no longer reads this rank's copy of it.
    wait_one(flags(q).ready, 2 * round_ + 2, q, watch);
    std::memcpy(data + part(q), at.on_rank(q) + part(q), part(q + 1) - part(q));
  }
  finish_round();
  wait_all(&RankFlags::done, round_, watch);
}

}  // namespace shardwise
