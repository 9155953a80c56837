#include "shared_memory_collectives.hpp"

#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "mpi_wait.hpp"
#include "rank_order_reduce.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/core/logging.hpp"
#include "shardwise/core/streaming_copy.hpp"

namespace shardwise {

namespace {

using Clock = std::chrono::steady_clock;

// Each rank's counters on lines of their own (two lines: the adjacent-line prefetcher pairs them).
constexpr std::size_t kFlagBytes = 256;
constexpr std::size_t kPageBytes = 4096;
// Polls that spin before a wait starts yielding, and the wait after which it sleeps instead.
constexpr int kSpinPolls = 64;
constexpr auto kYieldFor = std::chrono::milliseconds(2);

std::size_t header_bytes(int size) {
  const std::size_t raw = static_cast<std::size_t>(size) * kFlagBytes;
  return (raw + kPageBytes - 1) / kPageBytes * kPageBytes;
}

std::size_t segment_bytes(int size) {
  return header_bytes(size) + static_cast<std::size_t>(size) * 2 * kSharedMemoryHalfBytes;
}

// True when the test hook asks this rank's shm_open to fail.
bool forced_to_fail(int rank) {
  const char* value = std::getenv(kFailSharedMemoryEnv);
  if (value == nullptr || *value == '\0') return false;
  return std::strcmp(value, "all") == 0 || std::atoi(value) == rank;
}

// Opens (rank 0: creates and sizes) and maps the segment, and reserves this rank's `part` of
// it; returns null and sets `why` on failure.
void* map_segment(const std::string& name, bool create, std::size_t bytes, SegmentPart part,
                  int rank, std::string& why) {
  if (forced_to_fail(rank)) {
    why = str_cat("shm_open(", name, ") failed on rank ", rank, " (forced by ",
                  kFailSharedMemoryEnv, ")");
    return nullptr;
  }
  const int fd = ::shm_open(name.c_str(), create ? O_RDWR | O_CREAT | O_EXCL : O_RDWR, 0600);
  if (fd < 0) {
    why = str_cat("shm_open(", name, ") failed on rank ", rank, ": ", std::strerror(errno));
    return nullptr;
  }
  void* base = nullptr;
  if (create && ::ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    why = str_cat("ftruncate of ", name, " to ", bytes, " bytes failed: ", std::strerror(errno));
  } else if (int rc = part.bytes == 0 ? 0
                                      : ::posix_fallocate(fd, static_cast<off_t>(part.offset),
                                                          static_cast<off_t>(part.bytes));
             rc != 0) {
    // Reserving the pages now turns a full /dev/shm into this error instead of a SIGBUS later.
    why = str_cat("reserving ", part.bytes, " bytes of ", name, " on rank ", rank,
                  " failed: ", std::strerror(rc));
  } else {
    base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) {
      why = str_cat("mmap of ", name, " failed on rank ", rank, ": ", std::strerror(errno));
      base = nullptr;
    }
  }
  ::close(fd);
  return base;
}

std::atomic<std::uint64_t> next_segment_id{0};

}  // namespace

void* share_segment(MPI_Comm comm, int rank, std::size_t bytes, SegmentPart part,
                    const CollectiveCompletion& complete, std::string& why) {
  int size = 1;
  MPI_Comm_size(comm, &size);
  struct {
    int ok;
    char name[64];
  } offer{0, {}};
  void* base = nullptr;
  if (rank == 0) {
    // Unique per job (rank 0's pid) and per segment (a counter of this process).
    const std::string name =
        str_cat("/shardwise-", ::getpid(), "-", next_segment_id.fetch_add(1), "-", size);
    std::snprintf(offer.name, sizeof offer.name, "%s", name.c_str());
    base = map_segment(name, true, bytes, part, rank, why);
    offer.ok = base != nullptr;
  }
  complete("MPI_Ibcast (shared-memory segment)", [&](MPI_Request* r) {
    return MPI_Ibcast(&offer, static_cast<int>(sizeof offer), MPI_BYTE, 0, comm, r);
  });
  if (rank != 0 && offer.ok) base = map_segment(offer.name, false, bytes, part, rank, why);
  int all_mapped = base != nullptr;
  complete("MPI_Iallreduce (shared-memory segment)", [&](MPI_Request* r) {
    return MPI_Iallreduce(MPI_IN_PLACE, &all_mapped, 1, MPI_INT, MPI_MIN, comm, r);
  });
  // Every rank has mapped it (or given up): the name is no longer needed, and an unlinked
  // segment disappears with the last mapping even if the job is killed.
  if (rank == 0 && offer.ok) ::shm_unlink(offer.name);
  if (!all_mapped && base != nullptr) {
    ::munmap(base, bytes);
    base = nullptr;
  }
  return base;
}

static_assert(sizeof(std::atomic<std::uint64_t>) == 8 &&
              std::atomic<std::uint64_t>::is_always_lock_free);

std::unique_ptr<SharedMemoryCollectives> SharedMemoryCollectives::create(
    MPI_Comm comm, const std::string& group_name, const CollectiveCompletion& complete) {
  int rank = 0;
  int size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  if (size < 2) return nullptr;
  // MPI_Comm_split_type blocks with no deadline: meet in a watched barrier first.
  complete("MPI_Ibarrier (before MPI_Comm_split_type)",
           [&](MPI_Request* r) { return MPI_Ibarrier(comm, r); });
  MPI_Comm node = MPI_COMM_NULL;
  int node_size = 0;
  if (MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
    MPI_Comm_size(node, &node_size);
    MPI_Comm_free(&node);
  }
  // Every rank sees the same answer: a group spanning nodes has a smaller node part everywhere.
  if (node_size != size) return nullptr;

  const std::size_t bytes = segment_bytes(size);
  std::string why;
  // Rank 0 reserves all of it: the counters and halves are small and touched by every rank.
  const SegmentPart part = rank == 0 ? SegmentPart{0, bytes} : SegmentPart{};
  void* base = share_segment(comm, rank, bytes, part, complete, why);
  if (!why.empty()) {
    log::warning("group ", group_name, ": shared-memory collectives unavailable (", why,
                 "); using the direct exchange");
  }
  if (base == nullptr) return nullptr;
  std::unique_ptr<SharedMemoryCollectives> segment(
      new SharedMemoryCollectives(base, bytes, rank, size, group_name));
  segment->probe_single_copy(comm, complete);
  return segment;
}

void SharedMemoryCollectives::probe_single_copy(MPI_Comm comm,
                                                const CollectiveCompletion& complete) {
  // Only when every rank asks for it (one small all-reduce at set-up otherwise).
  const char* wanted = std::getenv(kSingleCopyEnv);
  int ok = wanted != nullptr && std::strcmp(wanted, "1") == 0;
  complete("MPI_Iallreduce (single copy wanted)", [&](MPI_Request* r) {
    return MPI_Iallreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, comm, r);
  });
  if (!ok) return;
  // Each rank offers its pid and a word holding its rank; each reads every peer's word.
  const std::uint64_t word = static_cast<std::uint64_t>(rank_) + 0x5eed0000;
  struct Offer {
    std::int64_t pid;
    std::uint64_t address;
  } mine{::getpid(), reinterpret_cast<std::uint64_t>(&word)};
  std::vector<Offer> offers(static_cast<std::size_t>(size_));
  complete("MPI_Iallgather (single-copy probe)", [&](MPI_Request* r) {
    return MPI_Iallgather(&mine, sizeof mine, MPI_BYTE, offers.data(), sizeof mine, MPI_BYTE, comm,
                          r);
  });
  for (int q = 0; q < size_ && ok; ++q) {
    if (q == rank_) continue;
    std::uint64_t got = 0;
    iovec local{&got, sizeof got};
    iovec remote{reinterpret_cast<void*>(offers[q].address), sizeof got};
    ok = ::process_vm_readv(static_cast<pid_t>(offers[q].pid), &local, 1, &remote, 1, 0) ==
             static_cast<ssize_t>(sizeof got) &&
         got == static_cast<std::uint64_t>(q) + 0x5eed0000;
  }
  // The peers' words must outlive their reads: this all-reduce is also the barrier for that.
  complete("MPI_Iallreduce (single-copy probe)", [&](MPI_Request* r) {
    return MPI_Iallreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, comm, r);
  });
  if (!ok) return;
  peer_pids_.resize(static_cast<std::size_t>(size_));
  for (int q = 0; q < size_; ++q) peer_pids_[q] = static_cast<int>(offers[q].pid);
}

SharedMemoryCollectives::SharedMemoryCollectives(void* base, std::size_t bytes, int rank, int size,
                                                 std::string group_name)
    : base_(base), bytes_(bytes), rank_(rank), size_(size), group_name_(std::move(group_name)) {}

SharedMemoryCollectives::~SharedMemoryCollectives() { ::munmap(base_, bytes_); }

std::byte* SharedMemoryCollectives::half(int owner, std::uint64_t round) const {
  return static_cast<std::byte*>(base_) + header_bytes(size_) +
         (static_cast<std::size_t>(owner) * 2 + round % 2) * kSharedMemoryHalfBytes;
}

SharedMemoryCollectives::RankFlags& SharedMemoryCollectives::flags(int owner) const {
  static_assert(sizeof(RankFlags) <= kFlagBytes);
  // The mapping starts zeroed: all-zero atomics are valid counters at 0.
  return *reinterpret_cast<RankFlags*>(static_cast<std::byte*>(base_) +
                                       static_cast<std::size_t>(owner) * kFlagBytes);
}

void SharedMemoryCollectives::wait_one(const std::atomic<std::uint64_t>& counter,
                                       std::uint64_t target, int peer,
                                       const SharedMemoryWatch& watch) const {
  if (counter.load(std::memory_order_acquire) >= target) return;
  const auto start = Clock::now();
  const auto limit = std::chrono::duration<double>(watch.timeout_seconds);
  for (int polls = 0;; ++polls) {
    if (counter.load(std::memory_order_acquire) >= target) return;
    if (polls < kSpinPolls) continue;
    const auto waited = Clock::now() - start;
    if (waited >= limit) {
      abort_on_comm_timeout(watch.describe(peer), std::chrono::duration<double>(waited).count(),
                            watch.timeout_seconds);
    }
    // The peer may need this core (more ranks than cores): give it up; a long wait sleeps.
    if (waited < kYieldFor) {
      ::sched_yield();
    } else {
      std::this_thread::sleep_for(PollBackoff::sleep_after(polls, waited));
    }
  }
}

void SharedMemoryCollectives::wait_all(std::atomic<std::uint64_t> RankFlags::*which,
                                       std::uint64_t target, const SharedMemoryWatch& watch) const {
  for (int j = 1; j < size_; ++j) {
    const int q = (rank_ + j) % size_;
    wait_one(flags(q).*which, target, q, watch);
  }
}

std::byte* SharedMemoryCollectives::begin_round(const SharedMemoryWatch& watch) {
  // This half was last filled in round_ - 2; every reader has finished it once done > round_ - 2.
  if (round_ >= 2) wait_all(&RankFlags::done, round_ - 1, watch);
  return half(rank_, round_);
}

void SharedMemoryCollectives::publish(std::uint64_t value, const SymmetricPlacement& placement) {
  RankFlags& own = flags(rank_);
  own.allocation.store(placement.allocation, std::memory_order_relaxed);
  own.offset.store(placement.offset, std::memory_order_relaxed);
  own.ready.store(value, std::memory_order_release);
}

void SharedMemoryCollectives::finish_round() {
  flags(rank_).done.store(round_ + 1, std::memory_order_release);
  ++round_;
}

void SharedMemoryCollectives::reduce_scatter(const std::byte* input, std::byte* output,
                                             std::size_t shard_bytes, std::size_t elem_size,
                                             ElementCombine combine, float input_scale,
                                             const SharedMemoryWatch& watch) {
  const int p = size_;
  const int r = rank_;
  if (shard_bytes == 0) return;
  const SymmetricPlacement placement =
      regions_->find(input, shard_bytes * static_cast<std::size_t>(p));
  if (placement.allocation != 0) {
    reduce_scatter_in_place(placement, output, shard_bytes, elem_size, combine, input_scale, watch);
    return;
  }
  // A half holds one piece for each other rank; 64-byte multiples keep every dtype whole.
  const std::size_t piece = kSharedMemoryHalfBytes / static_cast<std::size_t>(p - 1) / 64 * 64;
  // Where `owner` puts the piece destined for rank `dest` in its half.
  auto slot = [&](int owner, int dest) {
    return static_cast<std::size_t>(dest < owner ? dest : dest - 1) * piece;
  };
  for (std::size_t offset = 0; offset < shard_bytes; offset += piece) {
    const std::size_t n = std::min(piece, shard_bytes - offset);
    std::byte* mine = begin_round(watch);
    for (int j = 1; j < p; ++j) {
      const int q = (r + j) % p;
      std::memcpy(mine + slot(r, q), input + static_cast<std::size_t>(q) * shard_bytes + offset, n);
    }
    publish(2 * round_ + 2);
    wait_all(&RankFlags::ready, 2 * round_ + 1, watch);
    if (offset == 0) require_peers_same_placement({}, "reduce_scatter");
    const std::uint64_t round = round_;
    reduce_in_rank_order(
        p, n, elem_size, combine, input_scale,
        [&](int q) -> const std::byte* {
          return q == r ? input + static_cast<std::size_t>(r) * shard_bytes + offset
                        : half(q, round) + slot(q, r);
        },
        output + offset);
    finish_round();
  }
}

void SharedMemoryCollectives::all_gather_single_copy(std::byte* output, const std::byte* own_input,
                                                     std::size_t shard_bytes,
                                                     const SharedMemoryWatch& watch) {
  const int r = rank_;
  std::byte* own_output = output + static_cast<std::size_t>(r) * shard_bytes;
  const std::byte* source = own_input != nullptr ? own_input : own_output;
  flags(r).source.store(reinterpret_cast<std::uint64_t>(source), std::memory_order_relaxed);
  publish(2 * round_ + 2);
  if (own_input != nullptr) {
    copy_into_output(own_output, own_input, shard_bytes, shard_bytes * size_);
  }
  for (int j = 1; j < size_; ++j) {
    const int q = (r + j) % size_;
    wait_one(flags(q).ready, 2 * round_ + 1, q, watch);
    require_same_placement(q, {}, "all_gather");
    const std::uint64_t peer_source = flags(q).source.load(std::memory_order_relaxed);
    std::byte* dst = output + static_cast<std::size_t>(q) * shard_bytes;
    for (std::size_t done = 0; done < shard_bytes;) {
      iovec local{dst + done, shard_bytes - done};
      iovec remote{reinterpret_cast<void*>(peer_source + done), shard_bytes - done};
      const ssize_t n = ::process_vm_readv(peer_pids_[q], &local, 1, &remote, 1, 0);
      SW_REQUIRE(n > 0, CommError, "all-gather: reading rank ", q, "'s shard (", shard_bytes,
                 " bytes at offset ", done, ") with process_vm_readv failed: ",
                 n < 0 ? std::strerror(errno) : "no bytes read");
      done += static_cast<std::size_t>(n);
    }
  }
  // Every peer must have read this rank's shard before the caller may change it.
  finish_round();
  wait_all(&RankFlags::done, round_, watch);
}

void SharedMemoryCollectives::all_gather(std::byte* output, const std::byte* own_input,
                                         std::size_t shard_bytes, const SharedMemoryWatch& watch) {
  if (shard_bytes == 0) return;
  const SymmetricPlacement placement =
      regions_->find(output, shard_bytes * static_cast<std::size_t>(size_));
  if (placement.allocation != 0) {
    all_gather_in_place(placement, output, own_input, shard_bytes, watch);
    return;
  }
  if (single_copy() && shard_bytes >= kSingleCopyMinBytes) {
    begin_round(watch);  // keeps the rounds of the segment's halves in step
    all_gather_single_copy(output, own_input, shard_bytes, watch);
    return;
  }
  const int p = size_;
  const int r = rank_;
  const std::size_t output_bytes = shard_bytes * static_cast<std::size_t>(p);
  std::byte* own_output = output + static_cast<std::size_t>(r) * shard_bytes;
  for (std::size_t offset = 0; offset < shard_bytes; offset += kSharedMemoryHalfBytes) {
    const std::size_t n = std::min(kSharedMemoryHalfBytes, shard_bytes - offset);
    std::byte* mine = begin_round(watch);
    std::memcpy(mine, (own_input != nullptr ? own_input : own_output) + offset, n);
    publish(2 * round_ + 2);
    // Out of place, this rank's own piece goes to the output from the half, still in cache,
    // rather than in a pass of its own over the input.
    if (own_input != nullptr) copy_into_output(own_output + offset, mine, n, output_bytes);
    // Copy each peer's piece as soon as it is there, not after the slowest one.
    for (int j = 1; j < p; ++j) {
      const int q = (r + j) % p;
      wait_one(flags(q).ready, 2 * round_ + 1, q, watch);
      if (offset == 0) require_same_placement(q, {}, "all_gather");
      copy_into_output(output + static_cast<std::size_t>(q) * shard_bytes + offset, half(q, round_),
                       n, output_bytes);
    }
    finish_round();
  }
}

void SharedMemoryCollectives::all_reduce(std::byte* data, std::size_t numel, std::size_t elem_size,
                                         ElementCombine combine, const SharedMemoryWatch& watch) {
  const int p = size_;
  const int r = rank_;
  if (numel == 0) return;
  const SymmetricPlacement placement = regions_->find(data, numel * elem_size);
  if (placement.allocation != 0) {
    all_reduce_in_place(placement, data, numel, elem_size, combine, watch);
    return;
  }
  const std::size_t round_elems = kSharedMemoryHalfBytes / elem_size;
  for (std::size_t first = 0; first < numel; first += round_elems) {
    const std::size_t count = std::min(round_elems, numel - first);
    std::byte* chunk = data + first * elem_size;
    // Rank q reduces elements [part(q), part(q + 1)) of the chunk, in every rank's half.
    auto part = [&](int q) {
      return count * static_cast<std::size_t>(q) / static_cast<std::size_t>(p);
    };
    std::byte* mine = begin_round(watch);
    std::memcpy(mine, chunk, count * elem_size);
    publish(2 * round_ + 1);
    wait_all(&RankFlags::ready, 2 * round_ + 1, watch);
    if (first == 0) require_peers_same_placement({}, "all_reduce");
    const std::uint64_t round = round_;
    const std::size_t lo = part(r) * elem_size;
    reduce_in_rank_order(
        p, part(r + 1) * elem_size - lo, elem_size, combine, 1.0f,
        [&](int q) -> const std::byte* { return half(q, round) + lo; }, mine + lo);
    publish(2 * round_ + 2);
    for (int j = 0; j < p; ++j) {
      const int q = (r + j) % p;
      if (q != r) wait_one(flags(q).ready, 2 * round_ + 2, q, watch);
      const std::size_t q_lo = part(q) * elem_size;
      std::memcpy(chunk + q_lo, half(q, round) + q_lo, part(q + 1) * elem_size - q_lo);
    }
    finish_round();
  }
}

namespace {

class SharedMemoryAlgorithm final : public CollectiveImplementation {
 public:
  SharedMemoryAlgorithm(const CollectiveContext& context,
                        std::unique_ptr<SharedMemoryCollectives> segment)
      : CollectiveImplementation(context), segment_(std::move(segment)) {}

  void reduce_scatter(const ReduceScatterCall& call) override {
    segment_->reduce_scatter(call.input, call.output, call.shard_bytes, dtype_size(call.dtype),
                             element_combine(call.dtype, call.op), call.input_scale, watch());
  }
  bool folds_input_scale() const override { return true; }
  bool single_copy_all_gather() const override { return segment_->single_copy(); }
  SymmetricMemoryPtr allocate_symmetric(std::size_t bytes) override {
    return segment_->allocate_symmetric(context().p2p_comm, bytes, context().complete);
  }

  // Copies this rank's shard to its place itself, from cache.
  void all_gather(std::byte* output, const std::byte* own_input, std::size_t shard_bytes,
                  DType /*dtype*/) override {
    segment_->all_gather(output, own_input, shard_bytes, watch());
  }

  bool all_reduce(std::byte* data, std::int64_t numel, DType dtype, ReduceOp op) override {
    segment_->all_reduce(data, static_cast<std::size_t>(numel), dtype_size(dtype),
                         element_combine(dtype, op), watch());
    return true;
  }

 private:
  // The timeout as it is when the operation starts.
  SharedMemoryWatch watch() const {
    return SharedMemoryWatch{context().timeout_seconds(), context().describe};
  }

  std::unique_ptr<SharedMemoryCollectives> segment_;
};

}  // namespace

std::unique_ptr<CollectiveImplementation> make_shared_memory_collectives(
    const CollectiveContext& context) {
  std::unique_ptr<SharedMemoryCollectives> segment =
      SharedMemoryCollectives::create(context.p2p_comm, context.group_name, context.complete);
  if (segment == nullptr) return nullptr;
  return std::make_unique<SharedMemoryAlgorithm>(context, std::move(segment));
}

}  // namespace shardwise
