// Reduce-scatter, all-gather and all-reduce through one POSIX shared-memory segment per group,
// for groups whose ranks all run on one node (private to the MPI backend).
//
// Each rank owns two 1 MiB halves of the segment (double buffering). A round copies the bytes a
// rank contributes into one of its halves and publishes them with a release store of a sequence
// number; the other ranks read them straight out of the segment (acquire) while reducing or
// gathering, then publish that they are done with the half, so it can be refilled two rounds
// later. No MPI message is involved: no rendezvous, no progress engine, no receive copy.
//
// Opt-in (SHARDWISE_SINGLE_COPY=1 when the segment is set up): a large all-gather skips the
// segment where the kernel allows it. Each rank publishes where its shard is, and the others copy
// it straight into their outputs with process_vm_readv (Linux's cross-memory attach, which Open
// MPI's single-copy transfers use too): one copy per byte where the segment makes two. Off by
// default because on the AVX2 development VM it was slower (the segment's halves stay in cache,
// so its two copies cost about one of DRAM traffic, and the kernel's copy is slower than ours);
// docs/collectives.md has the figures. Probed when the segment is set up; where the kernel
// forbids it (another user, a ptrace policy) every size goes through the segment.
//
// Symmetric memory (symmetric_memory.hpp; shared_memory_symmetric.cpp): allocate_symmetric maps
// one more segment holding every rank's allocation; a reduce-scatter input, all-gather output or
// all-reduce buffer found inside one is read in place from the peers' allocations, in one round,
// with no copy into the halves.
//
// Reductions run in rank order, ((x[0] op x[1]) op x[2]) ..., as the direct exchange does, so
// results equal kDirect's bit for bit. Waits poll the flags under the comm watchdog's deadline,
// yielding the core between polls (ranks may outnumber cores) and sleeping once a wait is long.
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "collective_implementation.hpp"
#include "peer_links.hpp"
#include "shardwise/comm/comm_deadline.hpp"
#include "shardwise/comm/symmetric_memory.hpp"
#include "symmetric_regions.hpp"

namespace shardwise {

// Bytes of one half (one rank's buffer for one round).
inline constexpr std::size_t kSharedMemoryHalfBytes = std::size_t{1} << 20;

// Environment variable naming a group rank whose shm_open is treated as failed (tests of the
// fallback); "all" fails it on every rank.
inline constexpr const char* kFailSharedMemoryEnv = "SHARDWISE_TEST_FAIL_SHM_OPEN";
// Environment variable that turns the single-copy all-gather on ("1").
inline constexpr const char* kSingleCopyEnv = "SHARDWISE_SINGLE_COPY";
// Shards from this size on are all-gathered by single copy when it is available.
inline constexpr std::size_t kSingleCopyMinBytes = std::size_t{256} << 10;

// What a wait that passed the deadline reports: the watchdog's description for a peer.
struct SharedMemoryWatch {
  double timeout_seconds = kDefaultCommTimeoutSeconds;
  std::function<CommWaitDescription(int peer)> describe;
};

// Runs one non-blocking MPI call under the watchdog.
using CollectiveCompletion =
    std::function<void(const char* call, const std::function<int(MPI_Request*)>&)>;

class SharedMemoryCollectives {
 public:
  // Collective over `comm` (every rank calls it at the same point). Returns null on every rank
  // unless all ranks share one node and every rank mapped the segment; the reason is logged once
  // (rank 0). `complete` runs one non-blocking MPI call under the watchdog.
  static std::unique_ptr<SharedMemoryCollectives> create(MPI_Comm comm,
                                                         const std::string& group_name,
                                                         const CollectiveCompletion& complete);

  ~SharedMemoryCollectives();
  SharedMemoryCollectives(const SharedMemoryCollectives&) = delete;
  SharedMemoryCollectives& operator=(const SharedMemoryCollectives&) = delete;

  // `input` holds size shards of `shard_bytes`; `output` (may be exactly this rank's shard of
  // input) receives the rank-order reduction of this rank's shard. With input_scale != 1 every
  // rank's contribution is multiplied by it (fp32, rounded) before it is added, which equals
  // scaling each input in place first; `combine` must then be an fp32 sum.
  void reduce_scatter(const std::byte* input, std::byte* output, std::size_t shard_bytes,
                      std::size_t elem_size, ElementCombine combine, float input_scale,
                      const SharedMemoryWatch& watch);

  // `output` holds size shards of `shard_bytes`; fills them all from the ranks' shards. This
  // rank's shard is `own_input`, or already in place in `output` when own_input is null.
  void all_gather(std::byte* output, const std::byte* own_input, std::size_t shard_bytes,
                  const SharedMemoryWatch& watch);

  // In place on `numel` elements of `elem_size` bytes: every element reduced in rank order.
  void all_reduce(std::byte* data, std::size_t numel, std::size_t elem_size, ElementCombine combine,
                  const SharedMemoryWatch& watch);

  // Zeroed memory of `bytes` on every rank in one new segment all ranks map, registered so the
  // collectives above run in place on it. Collective over `comm` (this group's ranks); null on
  // every rank when some rank could not map it (the reason is logged where it happened).
  SymmetricMemoryPtr allocate_symmetric(MPI_Comm comm, std::size_t bytes,
                                        const CollectiveCompletion& complete);

  int rank() const { return rank_; }
  int size() const { return size_; }
  // Whether large all-gathers copy straight from the peers' memory (process_vm_readv).
  bool single_copy() const { return !peer_pids_.empty(); }

 private:
  struct RankFlags;
  SharedMemoryCollectives(void* base, std::size_t bytes, int rank, int size,
                          std::string group_name);

  std::byte* half(int owner, std::uint64_t round) const;
  RankFlags& flags(int owner) const;
  // Waits until every other rank's `which` counter reaches `target`.
  void wait_all(std::atomic<std::uint64_t> RankFlags::*which, std::uint64_t target,
                const SharedMemoryWatch& watch) const;
  void wait_one(const std::atomic<std::uint64_t>& counter, std::uint64_t target, int peer,
                const SharedMemoryWatch& watch) const;
  // Starts a round: waits until every rank finished reading this rank's half of two rounds ago.
  std::byte* begin_round(const SharedMemoryWatch& watch);
  // Publishes this rank's ready counter, with where its buffer of the collective lies.
  void publish(std::uint64_t value, const SymmetricPlacement& placement = {});
  void finish_round();
  // Throws CommError unless rank q's buffer of this collective lies where this rank's does (both
  // in ordinary memory, or both at one offset of one symmetric allocation).
  void require_same_placement(int q, const SymmetricPlacement& mine, const char* what) const;
  // The same for every other rank (once all of them have published their ready counter).
  void require_peers_same_placement(const SymmetricPlacement& mine, const char* what) const;
  // The in-place paths for buffers in symmetric memory: one round, returning once every peer
  // has read this rank's data.
  void reduce_scatter_in_place(const SymmetricPlacement& input, std::byte* output,
                               std::size_t shard_bytes, std::size_t elem_size,
                               ElementCombine combine, float input_scale,
                               const SharedMemoryWatch& watch);
  void all_gather_in_place(const SymmetricPlacement& at, std::byte* output,
                           const std::byte* own_input, std::size_t shard_bytes,
                           const SharedMemoryWatch& watch);
  void all_reduce_in_place(const SymmetricPlacement& at, std::byte* data, std::size_t numel,
                           std::size_t elem_size, ElementCombine combine,
                           const SharedMemoryWatch& watch);
  // One all-gather round by single copy: every peer's shard read from its memory.
  void all_gather_single_copy(std::byte* output, const std::byte* own_input,
                              std::size_t shard_bytes, const SharedMemoryWatch& watch);
  // Sets peer_pids_ when every rank asked for it and can read every other rank's memory
  // (collective).
  void probe_single_copy(MPI_Comm comm, const CollectiveCompletion& complete);

  void* base_ = nullptr;
  std::size_t bytes_ = 0;
  int rank_ = 0;
  int size_ = 1;
  std::uint64_t round_ = 0;                   // rounds this group has run; the same on every rank
  std::vector<int> peer_pids_;                // by group rank; empty without single copy
  bool reported_symmetric_fallback_ = false;  // warned that an allocation fell back to private
  std::string group_name_;
  std::shared_ptr<SymmetricRegions> regions_ = std::make_shared<SymmetricRegions>();
};

// The counters one rank publishes. ready: 2g+1 once its data of round g is in its half, 2g+2
// once its second phase (all-reduce's reduced part) is; done: g+1 once it read everything it
// reads in round g. source: in a single-copy round, the address of its shard in its own memory;
// allocation and offset: where its buffer of the round's collective lies (SymmetricPlacement;
// all written before ready, on ready's line).
struct SharedMemoryCollectives::RankFlags {
  alignas(128) std::atomic<std::uint64_t> ready{0};
  std::atomic<std::uint64_t> source{0};
  std::atomic<std::uint64_t> allocation{0};
  std::atomic<std::uint64_t> offset{0};
  alignas(128) std::atomic<std::uint64_t> done{0};
};

// Bytes of a segment one rank reserves (posix_fallocate) when it maps it. The pages are placed
// by the reserving process, so on a NUMA node each rank reserving its own part gets it local.
struct SegmentPart {
  std::size_t offset = 0;
  std::size_t bytes = 0;
};

// Collective over `comm`: rank 0 creates a segment of `bytes`, every rank maps it and reserves
// its `part`. Returns the mapping, or null on every rank unless all of them mapped it; `why`
// says what failed here.
void* share_segment(MPI_Comm comm, int rank, std::size_t bytes, SegmentPart part,
                    const CollectiveCompletion& complete, std::string& why);

// CollectiveAlgorithm::kSharedMemory: the group's segment, set up (collectively) here; null when
// SharedMemoryCollectives::create gives none. Folds the input scale into the reduction and has
// an all_reduce of its own.
std::unique_ptr<CollectiveImplementation> make_shared_memory_collectives(
    const CollectiveContext& context);

}  // namespace shardwise
