// Symmetric memory: one allocation of the same size on every rank of a group, all of them placed
// in one shared-memory segment that every rank maps, so the group's collectives read and write
// the peers' data where it lies instead of copying it through the group's segment (the idea of
// NCCL's registered windows and PyTorch's SymmetricMemory, here for host memory on one node).
//
// A reduce_scatter whose input, an all_gather whose output, or an all_reduce whose buffer lies in
// symmetric memory of the group that runs it, at the same offset of the same allocation on every
// rank, runs in place: each rank reduces (or copies) its part straight from the peers'
// allocations, and the call returns once every peer has finished reading this rank's data. The
// result bits are those of the copying path. Every rank must pass symmetric memory at the same
// offset, or every rank ordinary memory; a rank that differs makes the collective fail with a
// CommError on every rank.
#pragma once

#include <cstddef>
#include <memory>

#include "shardwise/comm/process_group.hpp"

namespace shardwise {

class SymmetricMemory {
 public:
  // `owner` keeps the memory (and its registration with the group) alive.
  SymmetricMemory(std::byte* data, std::size_t bytes, bool shared, std::shared_ptr<void> owner)
      : data_(data), bytes_(bytes), shared_(shared), owner_(std::move(owner)) {}

  // Zeroed at allocation, 4096-byte aligned.
  std::byte* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }
  // Whether the peers can read it. False where the group has no shared-memory segment (ranks on
  // several nodes, a group of one, a forced algorithm other than shared memory, or a mapping
  // that failed: /dev/shm full); the memory then is ordinary private memory and the collectives
  // copy as usual.
  bool shared() const { return shared_; }

 private:
  std::byte* data_;
  std::size_t bytes_;
  bool shared_;
  std::shared_ptr<void> owner_;
};
using SymmetricMemoryPtr = std::shared_ptr<SymmetricMemory>;

// Collective over `group` (an MPI group; any other kind of group gets private memory): every rank
// calls it at the same point with the same `bytes` (CommError naming the ranks otherwise). Queued
// behind the group's pending operations. Free the memory only after the collectives using it
// were waited for; ranks may free it at different times.
SymmetricMemoryPtr allocate_symmetric_memory(const ProcessGroupPtr& group, std::size_t bytes);

// What allocate_symmetric_memory gives where nothing can be shared: private zeroed memory with
// the same alignment (shared() false).
SymmetricMemoryPtr private_symmetric_memory(std::size_t bytes);

}  // namespace shardwise
