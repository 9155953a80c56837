// Probes of this machine's limits, measured in the benchmark's own run so each figure can be
// printed as a fraction of what the hardware does at that moment (the machine is shared, so a
// limit taken earlier would not be comparable):
//   - STREAM-style copy (a[i] = b[i]) and triad (a[i] = b[i] + s * c[i]) bandwidth, counting
//     the bytes read plus the bytes written, as STREAM does;
//   - single-call sgemm FLOP/s (OpenBLAS, the thread count the caller sets).
// print_figure() writes the one-line form scripts/bench.sh collects:
//   bench: <figure-name> ours=<value> limit=<value> unit=<GB/s|GF/s> ratio=<ours/limit>
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "shardwise/core/blas.hpp"

namespace shardwise::bench {

// Best (shortest) wall time of `reps` runs of f after one warm-up run (page faults, caches).
template <typename F>
double best_seconds(int reps, F&& f) {
  f();
  double best = 1e30;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    best = std::min(best,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

// Keeps the compiler from dropping stores whose results are never read.
inline void keep(const void* p) { asm volatile("" : : "r"(p) : "memory"); }

// Arrays of this many floats (3 x 64 MiB for triad) are far beyond every cache level.
inline constexpr std::size_t kStreamElements = std::size_t{1} << 24;

inline volatile float runtime_zero = 0.0f;

// One-thread STREAM copy: GB/s of bytes read + written.
inline double stream_copy_gbs(int reps = 10) {
  std::vector<float> a(kStreamElements, 1.0f), b(kStreamElements, 2.0f);
  const double s = best_seconds(reps, [&] {
    float* __restrict dst = a.data();
    const float* __restrict src = b.data();
    // + a run-time zero: keeps GCC from turning the loop into a memcpy call (STREAM's copy is
    // a plain load/store loop; glibc's memcpy switches to non-temporal stores on large sizes).
    const float zero = runtime_zero;
    for (std::size_t i = 0; i < kStreamElements; ++i) dst[i] = src[i] + zero;
    keep(dst);
  });
  return 2.0 * sizeof(float) * static_cast<double>(kStreamElements) / s * 1e-9;
}

// One-thread STREAM triad: GB/s of bytes read + written (12 bytes per element).
inline double stream_triad_gbs(int reps = 10) {
  std::vector<float> a(kStreamElements, 1.0f), b(kStreamElements, 2.0f), c(kStreamElements, 3.0f);
  const double s = best_seconds(reps, [&] {
    float* __restrict dst = a.data();
    const float* __restrict x = b.data();
    const float* __restrict y = c.data();
    for (std::size_t i = 0; i < kStreamElements; ++i) dst[i] = x[i] + 3.0f * y[i];
    keep(dst);
  });
  return 3.0 * sizeof(float) * static_cast<double>(kStreamElements) / s * 1e-9;
}

// sgemm GF/s on n x n x n (2 n^3 flops per call), with the BLAS thread count as it is set.
inline double sgemm_gflops(std::int64_t n = 2048, int reps = 3) {
  const auto count = static_cast<std::size_t>(n * n);
  std::vector<float> a(count, 0.5f), b(count, 0.25f), c(count, 0.0f);
  const double s = best_seconds(reps, [&] {
    blas::sgemm(blas::Op::kNone, blas::Op::kNone, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f,
                c.data(), n);
  });
  return 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n) / s * 1e-9;
}

inline void print_figure(const char* name, double ours, double limit, const char* unit) {
  std::printf("bench: %s ours=%.2f limit=%.2f unit=%s ratio=%.3f\n", name, ours, limit, unit,
              ours / limit);
  std::fflush(stdout);
}

}  // namespace shardwise::bench
