// The symmetric allocations of one group's shared-memory collectives (private to the MPI
// backend): where each lies in this rank's address space, so a collective can tell whether its
// buffer is one of them and find the peers' copies of it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

namespace shardwise {

// Every symmetric allocation (shared or the private fallback) starts on a page of its own.
inline constexpr std::size_t kSymmetricPageBytes = 4096;

// Bytes one rank's allocation of `bytes` takes: whole pages, at least one.
inline std::size_t symmetric_stride(std::size_t bytes) {
  return ((bytes == 0 ? 1 : bytes) + kSymmetricPageBytes - 1) / kSymmetricPageBytes *
         kSymmetricPageBytes;
}

// Where a collective's buffer lies. allocation 0: ordinary memory. Allocation ids count the
// group's successful symmetric allocations, so they agree across ranks (allocation is collective).
struct SymmetricPlacement {
  std::uint64_t allocation = 0;
  std::uint64_t offset = 0;      // bytes from the start of this rank's allocation
  std::byte* segment = nullptr;  // rank q's allocation starts at segment + q * stride
  std::size_t stride = 0;

  // The buffer's copy on group rank q.
  const std::byte* on_rank(int q) const {
    return segment + static_cast<std::size_t>(q) * stride + offset;
  }
};

// Thread-safe: the group's worker looks buffers up while callers free their allocations.
class SymmetricRegions {
 public:
  // Registers a segment holding every rank's allocation of `bytes`; returns its id.
  std::uint64_t add(std::byte* segment, std::size_t stride, std::size_t bytes, int rank) {
    std::lock_guard<std::mutex> lock(mutex_);
    regions_.push_back({next_id_, segment, stride, bytes, rank});
    return next_id_++;
  }

  void remove(std::uint64_t id) {
    std::lock_guard<std::mutex> lock(mutex_);
    std::erase_if(regions_, [id](const Region& region) { return region.id == id; });
  }

  // The placement of [data, data + bytes) when it lies inside one of this rank's allocations.
  SymmetricPlacement find(const std::byte* data, std::size_t bytes) const {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto address = reinterpret_cast<std::uintptr_t>(data);
    for (const Region& region : regions_) {
      const auto own = reinterpret_cast<std::uintptr_t>(region.segment) +
                       static_cast<std::uintptr_t>(region.rank) * region.stride;
      if (address >= own && address - own <= region.bytes &&
          bytes <= region.bytes - (address - own)) {
        return {region.id, address - own, region.segment, region.stride};
      }
    }
    return {};
  }

 private:
  struct Region {
    std::uint64_t id;
    std::byte* segment;
    std::size_t stride;
    std::size_t bytes;
    int rank;
  };
  mutable std::mutex mutex_;
  std::vector<Region> regions_;
  std::uint64_t next_id_ = 1;
};

}  // namespace shardwise
