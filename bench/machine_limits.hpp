// Probes of this machine's limits, measured in the benchmark's own run so each figure can be
// printed as a fraction of what the hardware does at that moment (the machine is shared, so a
// limit taken earlier would not be comparable):
//   - STREAM-style copy (a[i] = b[i]) and triad (a[i] = b[i] + s * c[i]) bandwidth, counting
//     the bytes read plus the bytes written, as STREAM does;
//   - one-thread sgemm FLOP/s (OpenBLAS): best single product, or sustained over a window;
//   - the disk: dd-style write + fsync of given files, sequential read() of files (after dropping
//     them from the page cache with posix_fadvise(DONTNEED) when asked);
//   - the wire: MPI ping-pong between ranks 0 and 1.
// Every CPU figure is single-threaded and timed in CPU time (the calling thread's, or the process's
// for a whole training run): on an idle machine that is the wall time, and on a machine shared
// with other jobs it leaves out the time the scheduler gave to them, which would otherwise
// swamp both the probe and the figure.
// print_figure() writes the one-line form scripts/bench.sh collects:
//   bench: <figure-name> ours=<value> limit=<value> unit=<GB/s|GF/s> ratio=<ours/limit>
#pragma once

#include <fcntl.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "bench_harness.hpp"
#include "shardwise/core/blas.hpp"
#include "shardwise/core/cpu_time.hpp"

namespace shardwise::bench {

// Best (shortest) thread CPU time of `reps` runs of f after one warm-up run (page faults,
// caches). f must do its work on the calling thread.
template <typename F>
double best_seconds(int reps, F&& f) {
  f();
  double best = 1e30;
  for (int i = 0; i < reps; ++i) {
    const double t0 = thread_cpu_seconds();
    f();
    best = std::min(best, thread_cpu_seconds() - t0);
  }
  return best;
}

// Samples of one limit taken while a figure is measured (rates: higher is better). The figure
// divides by the best sample, so a probe's bad moment cannot make the figure look better, and
// prints the spread beside it, so a reader sees how much the machine moved during the run.
class ProbeSamples {
 public:
  ProbeSamples() = default;
  // Rates `work / seconds` of timed probe runs.
  static ProbeSamples of_seconds(double work, const std::vector<double>& seconds) {
    ProbeSamples samples;
    for (double s : seconds) samples.add(work / s);
    return samples;
  }
  void add(double rate) { rates_.push_back(rate); }
  std::size_t size() const { return rates_.size(); }
  double best() const { return sorted().back(); }
  double min() const { return sorted().front(); }
  double median() const {
    const std::vector<double> r = sorted();
    return r[r.size() / 2];
  }

 private:
  std::vector<double> sorted() const {
    SW_CHECK(!rates_.empty(), "a limit without samples");
    std::vector<double> r = rates_;
    std::sort(r.begin(), r.end());
    return r;
  }
  std::vector<double> rates_;
};

// Times `probe` and `ours` alternately (after one warm-up each), `reps` times, keeping the best
// of each and every probe time: a slow spell of the shared machine then hits both alike.
struct PairedSeconds {
  double probe = 1e30;
  double ours = 1e30;
  std::vector<double> probe_samples;  // seconds of each probe run
};
template <typename P, typename O>
PairedSeconds best_interleaved(int reps, P&& probe, O&& ours) {
  probe();
  ours();
  PairedSeconds best;
  for (int i = 0; i < reps; ++i) {
    best.probe_samples.push_back(best_seconds(1, probe));
    best.probe = std::min(best.probe, best.probe_samples.back());
    best.ours = std::min(best.ours, best_seconds(1, ours));
  }
  return best;
}

// Keeps the compiler from dropping stores whose results are never read.
inline void keep(const void* p) { asm volatile("" : : "r"(p) : "memory"); }

inline volatile float runtime_zero = 0.0f;

// STREAM copy and triad on one thread over arrays far beyond every cache level (64 MiB each).
class StreamProbe {
 public:
  static constexpr std::size_t kElements = std::size_t{1} << 24;
  // Bytes read + written per pass, as STREAM counts them.
  static constexpr double kCopyBytes = 2.0 * sizeof(float) * kElements;
  static constexpr double kTriadBytes = 3.0 * sizeof(float) * kElements;

  StreamProbe() : a_(kElements, 1.0f), b_(kElements, 2.0f), c_(kElements, 3.0f) {}

  void copy() {
    float* __restrict dst = a_.data();
    const float* __restrict src = b_.data();
    // + a run-time zero: keeps GCC from turning the loop into a memcpy call (STREAM's copy is a
    // plain load/store loop; glibc's memcpy switches to non-temporal stores on large sizes).
    const float zero = runtime_zero;
    for (std::size_t i = 0; i < kElements; ++i) dst[i] = src[i] + zero;
    keep(dst);
  }
  void triad() {
    float* __restrict dst = a_.data();
    const float* __restrict x = b_.data();
    const float* __restrict y = c_.data();
    for (std::size_t i = 0; i < kElements; ++i) dst[i] = x[i] + 3.0f * y[i];
    keep(dst);
  }

 private:
  std::vector<float> a_, b_, c_;
};

// One-thread STREAM copy / triad GB/s, measured on their own.
inline double stream_copy_gbs(int reps = 10) {
  StreamProbe p;
  return StreamProbe::kCopyBytes / best_seconds(reps, [&] { p.copy(); }) * 1e-9;
}
inline double stream_triad_gbs(int reps = 10) {
  StreamProbe p;
  return StreamProbe::kTriadBytes / best_seconds(reps, [&] { p.triad(); }) * 1e-9;
}

// The operands of the one-thread sgemm probes: n x n x n products (2 n^3 flops each) on one
// BLAS thread (timed in this thread's CPU time); the BLAS thread count is restored afterwards.
class SgemmProbe {
 public:
  explicit SgemmProbe(std::int64_t n)
      : n_(n),
        saved_threads_(blas::num_threads()),
        a_(static_cast<std::size_t>(n * n), 0.5f),
        b_(static_cast<std::size_t>(n * n), 0.25f),
        c_(static_cast<std::size_t>(n * n), 0.0f) {
    blas::set_num_threads(1);
  }
  ~SgemmProbe() { blas::set_num_threads(saved_threads_); }
  SgemmProbe(const SgemmProbe&) = delete;
  SgemmProbe& operator=(const SgemmProbe&) = delete;

  void product() {
    blas::sgemm(blas::Op::kNone, blas::Op::kNone, n_, n_, n_, 1.0f, a_.data(), n_, b_.data(), n_,
                0.0f, c_.data(), n_);
  }
  double gflops(int products, double seconds) const {
    const auto n = static_cast<double>(n_);
    return 2.0 * n * n * n * products / seconds * 1e-9;
  }

 private:
  std::int64_t n_;
  int saved_threads_;
  std::vector<float> a_, b_, c_;
};

// One-thread sgemm GF/s: the best of `reps` single products.
inline double sgemm_gflops(std::int64_t n = 2048, int reps = 3) {
  SgemmProbe probe(n);
  return probe.gflops(1, best_seconds(reps, [&] { probe.product(); }));
}

// One-thread sgemm GF/s sustained over a window: products back to back until `seconds` of thread
// CPU time have passed, total flops over total time. A best-of over single products picks the
// luckiest fraction of a second on a shared VM (per-product rates here swing by +-10%); a window
// as long as the work it is compared with averages over the same swings.
inline double sgemm_gflops_sustained(double seconds, std::int64_t n = 2048) {
  SgemmProbe probe(n);
  probe.product();  // warm-up: page faults, packing buffers
  const double t0 = thread_cpu_seconds();
  int products = 0;
  do {
    probe.product();
    ++products;
  } while (thread_cpu_seconds() - t0 < seconds);
  return probe.gflops(products, thread_cpu_seconds() - t0);
}

// Disk write limit, dd-style: each (name, bytes) is written with large write()s into a fresh
// file in `dir`, fsync'd, then the directory is fsync'd. Returns wall seconds.
inline double write_fsync_seconds(
    const std::filesystem::path& dir,
    const std::vector<std::pair<std::string, std::vector<char>>>& files) {
  return seconds_of([&] {
    for (const auto& [name, content] : files) {
      const std::filesystem::path path = dir / name;
      const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      check_syscall(fd >= 0, "cannot create", path);
      std::size_t done = 0;
      while (done < content.size()) {
        const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
        check_syscall(n > 0, "cannot write", path);
        done += static_cast<std::size_t>(n);
      }
      check_syscall(::fsync(fd) == 0, "cannot fsync", path);
      ::close(fd);
    }
    const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    check_syscall(dfd >= 0 && ::fsync(dfd) == 0, "cannot fsync", dir);
    ::close(dfd);
  });
}

// Asks the kernel to drop `path`'s clean pages from the page cache (so the next read goes to the
// disk). Returns false when that is not possible.
inline bool drop_from_page_cache(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::fdatasync(fd) == 0 && ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0;
  ::close(fd);
  return ok;
}

// Disk/page-cache read limit: read()s each file whole into its (pre-faulted) buffer, in order.
// Returns wall seconds.
inline double read_files_seconds(const std::vector<std::filesystem::path>& paths,
                                 std::vector<std::vector<char>>& buffers) {
  return seconds_of([&] {
    for (std::size_t i = 0; i < paths.size(); ++i) {
      const int fd = ::open(paths[i].c_str(), O_RDONLY | O_CLOEXEC);
      check_syscall(fd >= 0, "cannot open", paths[i]);
      std::size_t done = 0;
      while (done < buffers[i].size()) {
        const ssize_t n = ::read(fd, buffers[i].data() + done, buffers[i].size() - done);
        check_syscall(n > 0, "cannot read", paths[i]);
        done += static_cast<std::size_t>(n);
      }
      ::close(fd);
    }
  });
}

// Blocks in MPI_Ibarrier polled with sleeps, so ranks not taking part in a measurement do not
// take CPU from those that do (blocking MPI calls spin).
inline void idle_mpi_barrier() {
  MPI_Request request = MPI_REQUEST_NULL;
  MPI_Ibarrier(MPI_COMM_WORLD, &request);
  int done = 0;
  while (MPI_Test(&request, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && !done) {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

// One round trip of `n` bytes between ranks 0 and 1 (the others return at once).
inline void ping_pong_round_trip(std::vector<char>& message, int n, int me) {
  if (me == 0) {
    MPI_Send(message.data(), n, MPI_CHAR, 1, 0, MPI_COMM_WORLD);
    MPI_Recv(message.data(), n, MPI_CHAR, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  } else if (me == 1) {
    MPI_Recv(message.data(), n, MPI_CHAR, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Send(message.data(), n, MPI_CHAR, 0, 0, MPI_COMM_WORLD);
  }
}

// Wire limit: one-way MPI bandwidth between ranks 0 and 1 in GB/s, from the median ping-pong
// round trip of `bytes` (wall time). Every rank of MPI_COMM_WORLD calls it; all get rank 0's value.
//
// The round trips take turns over message buffers that together span `footprint` bytes (at
// least one message), the memory the measured operation itself goes through on each rank, so
// probe and figure see the same caches. On the 2-core Firecracker Xeon VM (480 MiB of L3) one
// 16 MiB buffer sent again and again climbed from 4 to 10.5 GB/s over ~40 round trips as it
// settled in cache, and fell back once a collective had run, while four or more buffers in
// turn held at 2.9-4.4 GB/s: the single-buffer probe read 3.4-6.9 GB/s from run to run.
// The buffers are kept across calls (a probe pays first touches once).
inline double mpi_ping_pong_gbps(std::size_t bytes, int iters, std::size_t footprint) {
  int me = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  static std::vector<std::vector<char>> pool;
  const std::size_t count = std::max<std::size_t>(1, (footprint + bytes - 1) / bytes);
  if (pool.size() < count) pool.resize(count);
  for (std::vector<char>& message : pool) {
    if (message.size() < bytes) message.assign(bytes, 1);
  }
  const int n = static_cast<int>(bytes);
  std::vector<double> t;
  for (int i = 0; i <= iters; ++i) {
    std::vector<char>& message = pool[static_cast<std::size_t>(i) % count];
    idle_mpi_barrier();
    // The barrier's sleeping polls wake the two ranks up to 200 us apart: meet with an empty
    // exchange first, so the timing starts with both of them running.
    if (me <= 1) {
      MPI_Sendrecv(nullptr, 0, MPI_CHAR, 1 - me, 1, nullptr, 0, MPI_CHAR, 1 - me, 1, MPI_COMM_WORLD,
                   MPI_STATUS_IGNORE);
    }
    const auto t0 = Clock::now();
    ping_pong_round_trip(message, n, me);
    if (i > 0) t.push_back(seconds_since(t0) / 2);
  }
  idle_mpi_barrier();
  double gbps = static_cast<double>(bytes) / median(t) / 1e9;
  MPI_Bcast(&gbps, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  return gbps;
}

// STREAM copy on every rank of MPI_COMM_WORLD at once, after a barrier: the sum of the ranks'
// rates (bytes read + written per second), i.e. the memory bandwidth the ranks share while a
// collective runs. Ranks outnumbering the cores take turns on them, so the sum is still the
// cores'. Every rank gets the sum.
inline double concurrent_stream_copy_gbs(StreamProbe& probe, int passes = 4) {
  idle_mpi_barrier();
  const auto t0 = Clock::now();
  for (int i = 0; i < passes; ++i) probe.copy();
  double gbs = passes * StreamProbe::kCopyBytes / seconds_since(t0) * 1e-9;
  MPI_Allreduce(MPI_IN_PLACE, &gbs, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  return gbs;
}

// The memory bound of a reduce-scatter or all-gather over the p ranks of MPI_COMM_WORLD, as bus
// bandwidth. With N bytes per rank, a reduce-scatter must read all p inputs and write p outputs
// of N/p, an all-gather read p shards of N/p and write p outputs of N: N (p + 1) bytes of memory
// traffic either way (at best: a byte that crosses between ranks through cache costs nothing).
// At the ranks' shared STREAM copy rate B that takes N (p + 1) / B, for N (p - 1) / p bus bytes:
// a bus bandwidth of at most B (p - 1) / (p (p + 1)). A single ping-pong copy moves 2 bytes of
// memory per message byte, so where collectives are memory-bound this bound is the lower, truer
// one. Every rank calls it.
inline double collective_memory_bound_gbs(StreamProbe& probe, int p) {
  return concurrent_stream_copy_gbs(probe) * (p - 1) / (p * (p + 1));
}

inline void print_figure(const char* name, double ours, double limit, const char* unit) {
  std::printf("bench: %s ours=%.2f limit=%.2f unit=%s ratio=%.3f\n", name, ours, limit, unit,
              ours / limit);
  std::fflush(stdout);
}

// The same line against the best of a probe's samples, followed by their spread:
//   ... ratio=<ours/best> probe_min=<v> probe_median=<v> probe_max=<v> probe_samples=<n>
inline void print_figure(const char* name, double ours, const ProbeSamples& limit,
                         const char* unit) {
  std::printf(
      "bench: %s ours=%.2f limit=%.2f unit=%s ratio=%.3f probe_min=%.2f probe_median=%.2f "
      "probe_max=%.2f probe_samples=%zu\n",
      name, ours, limit.best(), unit, ours / limit.best(), limit.min(), limit.median(),
      limit.best(), limit.size());
  std::fflush(stdout);
}

}  // namespace shardwise::bench
