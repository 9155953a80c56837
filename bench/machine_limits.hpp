// Probes of this machine's limits, measured in the benchmark's own run so each figure can be
// printed as a fraction of what the hardware does at that moment (the machine is shared, so a
// limit taken earlier would not be comparable):
//   - STREAM-style copy (a[i] = b[i]) and triad (a[i] = b[i] + s * c[i]) bandwidth, counting
//     the bytes read plus the bytes written, as STREAM does;
//   - one-thread sgemm FLOP/s (OpenBLAS).
// Every figure is single-threaded and timed in CPU time (the calling thread's, or the process's
// for a whole training run): on an idle machine that is the wall time, and on a machine shared
// with other jobs it leaves out the time the scheduler gave to them, which would otherwise
// swamp both the probe and the figure.
// print_figure() writes the one-line form scripts/bench.sh collects:
//   bench: <figure-name> ours=<value> limit=<value> unit=<GB/s|GF/s> ratio=<ours/limit>
#pragma once

#include <time.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "shardwise/core/blas.hpp"

namespace shardwise::bench {

// CPU seconds consumed so far by the calling thread / by the whole process.
inline double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}
inline double process_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

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

// Times `probe` and `ours` alternately (after one warm-up each), `reps` times, keeping the best
// of each: a slow spell of the shared machine then hits both alike.
struct PairedSeconds {
  double probe = 1e30;
  double ours = 1e30;
};
template <typename P, typename O>
PairedSeconds best_interleaved(int reps, P&& probe, O&& ours) {
  probe();
  ours();
  PairedSeconds best;
  for (int i = 0; i < reps; ++i) {
    best.probe = std::min(best.probe, best_seconds(1, probe));
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

// One-thread sgemm GF/s on n x n x n (2 n^3 flops per call).
inline double sgemm_gflops(std::int64_t n = 2048, int reps = 3) {
  const int saved_threads = blas::num_threads();
  blas::set_num_threads(1);  // timed in this thread's CPU time
  const auto count = static_cast<std::size_t>(n * n);
  std::vector<float> a(count, 0.5f), b(count, 0.25f), c(count, 0.0f);
  const double s = best_seconds(reps, [&] {
    blas::sgemm(blas::Op::kNone, blas::Op::kNone, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f,
                c.data(), n);
  });
  blas::set_num_threads(saved_threads);
  return 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n) / s * 1e-9;
}

inline void print_figure(const char* name, double ours, double limit, const char* unit) {
  std::printf("bench: %s ours=%.2f limit=%.2f unit=%s ratio=%.3f\n", name, ours, limit, unit,
              ours / limit);
  std::fflush(stdout);
}

}  // namespace shardwise::bench
