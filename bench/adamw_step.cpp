// AdamW step bandwidth against memcpy of the same number of bytes, measured side by side.
//
// An AdamW step over n elements reads param, grad, exp_avg, exp_avg_sq (16 n bytes) and writes
// param, exp_avg, exp_avg_sq (12 n bytes): 28 n bytes of traffic. The baseline copies 14 n bytes
// with memcpy (14 n read + 14 n written = the same 28 n). ratio = AdamW bytes/s / memcpy bytes/s.
// Both run on one thread (the optimizer step is single-threaded per rank).
//
// Then the "bench: adamw_step" figure: the largest size's AdamW traffic (28 bytes per element,
// read + written) against a one-thread STREAM triad probe (machine_limits.hpp), measured here.
//
// Usage: bench_adamw_step [--reps 20] | --figures-only
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "machine_limits.hpp"
#include "shardwise/core/cpu_isa.hpp"
#include "shardwise/optim/adamw.hpp"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// The bench: line: AdamW steps over 2^23 elements interleaved with STREAM triad passes.
void print_figure(int reps) {
  const std::int64_t n = std::int64_t{1} << 23;
  const auto count = static_cast<std::size_t>(n);
  std::vector<float> param(count, 0.5f), grad(count, 0.01f);
  using namespace shardwise::optim;
  AdamW adamw(single_group({{"w", {n}, param.data(), grad.data(), {}}}), AdamWOptions{});
  shardwise::bench::StreamProbe stream;
  const shardwise::bench::PairedSeconds t = shardwise::bench::best_interleaved(
      reps, [&] { stream.triad(); }, [&] { adamw.step_with_ready_grads(); });
  std::printf("figure: %lld elements, 1 thread, ISA level %s\n", static_cast<long long>(n),
              std::string(shardwise::isa_level_name(shardwise::active_isa_level())).c_str());
  using shardwise::bench::ProbeSamples;
  using shardwise::bench::StreamProbe;
  shardwise::bench::print_figure(
      "adamw_step", 28.0 * static_cast<double>(n) / t.ours * 1e-9,
      ProbeSamples::of_seconds(StreamProbe::kTriadBytes * 1e-9, t.probe_samples), "GB/s");
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::string(argv[i]) == "--reps") reps = std::max(1, std::atoi(argv[i + 1]));
  }
  if (argc > 1 && std::string(argv[1]) == "--figures-only") {
    print_figure(reps);
    return 0;
  }
  std::printf(
      "AdamW (fp32 state, bias correction, decoupled wd) vs memcpy; 1 thread each; "
      "best of %d interleaved runs\n",
      reps);
  std::printf("%-10s %10s %14s %14s %8s %12s\n", "elements", "MB moved", "AdamW GB/s",
              "memcpy GB/s", "ratio", "AdamW Gel/s");
  const Clock::time_point start = Clock::now();
  for (std::int64_t n : {std::int64_t{1} << 14, std::int64_t{1} << 17, std::int64_t{1} << 20,
                         std::int64_t{1} << 23}) {
    const auto count = static_cast<std::size_t>(n);
    std::vector<float> param(count), grad(count);
    std::mt19937 rng(7);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    for (float& v : param) v = dist(rng);
    for (float& v : grad) v = dist(rng);
    using namespace shardwise::optim;
    AdamW adamw(single_group({{"w", {n}, param.data(), grad.data(), {}}}), AdamWOptions{});
    // memcpy of 14 bytes per element, in and out.
    std::vector<char> src(count * 14, 1), dst(count * 14, 0);
    adamw.step_with_ready_grads();  // touches the state (first-touch page faults not timed)
    std::memcpy(dst.data(), src.data(), src.size());
    // Small sizes run many times per measurement so the timer resolution does not matter.
    const int inner = static_cast<int>(std::max<std::int64_t>(1, (std::int64_t{1} << 22) / n));
    double best_adamw = 1e30, best_copy = 1e30;
    for (int r = 0; r < reps; ++r) {
      Clock::time_point t0 = Clock::now();
      for (int k = 0; k < inner; ++k) adamw.step_with_ready_grads();
      best_adamw = std::min(best_adamw, seconds_since(t0) / inner);
      t0 = Clock::now();
      for (int k = 0; k < inner; ++k) {
        std::memcpy(dst.data(), src.data(), src.size());
        // Keep the copy from being elided.
        asm volatile("" : : "r"(dst.data()) : "memory");
      }
      best_copy = std::min(best_copy, seconds_since(t0) / inner);
    }
    const double bytes = 28.0 * static_cast<double>(n);
    std::printf("%-10lld %10.1f %14.2f %14.2f %8.2f %12.3f\n", (long long)n, bytes / 1e6,
                bytes / best_adamw / 1e9, bytes / best_copy / 1e9, best_copy / best_adamw,
                static_cast<double>(n) / best_adamw / 1e9);
    std::fflush(stdout);
  }
  print_figure(reps);
  std::printf("total %.1f s\n", seconds_since(start));
  return 0;
}
