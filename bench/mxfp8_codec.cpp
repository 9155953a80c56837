// MXFP8 codec throughput next to a plain memcpy of the same bytes, measured in the same run.
// For each size and thread count prints GB/s of input bytes for quantize (fp32 / bf16 in) and
// dequantize (MXFP8 in, fp32 / bf16 out), memcpy GB/s of the same byte count on the same number
// of threads, and the ratio codec / memcpy. Best of several repetitions (the machine is shared).
// Then the "bench:" figures (machine_limits.hpp): one thread, a memory-bound tensor, bytes read
// + written per second against a STREAM copy probe, on the ISA level the CPU offers.
//   bench_mxfp8_codec [rows cols [reps]] | --figures-only
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "machine_limits.hpp"
#include "shardwise/core/cpu_isa.hpp"
#include "shardwise/core/float_convert.hpp"
#include "shardwise/core/mxfp8.hpp"

namespace {

using namespace shardwise;

using bench::best_seconds;

// memcpy of `bytes` split into `threads` contiguous pieces.
void parallel_memcpy(std::byte* dst, const std::byte* src, std::size_t bytes, int threads) {
#pragma omp parallel num_threads(threads)
  {
    const auto n = static_cast<std::size_t>(omp_get_num_threads());
    const auto t = static_cast<std::size_t>(omp_get_thread_num());
    const std::size_t begin = bytes * t / n, end = bytes * (t + 1) / n;
    std::memcpy(dst + begin, src + begin, end - begin);
  }
}

void report(const char* op, int threads, std::size_t in_bytes, double codec_s, double memcpy_s) {
  const double codec_gbs = static_cast<double>(in_bytes) / codec_s * 1e-9;
  const double memcpy_gbs = static_cast<double>(in_bytes) / memcpy_s * 1e-9;
  std::printf("  %-34s threads=%d  %8.2f GB/s   memcpy %8.2f GB/s   ratio %.2f\n", op, threads,
              codec_gbs, memcpy_gbs, codec_gbs / memcpy_gbs);
}

void run(std::int64_t rows, std::int64_t cols, int reps) {
  const std::int64_t n = rows * cols;
  std::mt19937 gen(1);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> x(static_cast<std::size_t>(n));
  for (auto& v : x) v = normal(gen);
  std::vector<bf16_bits> xb(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) xb[i] = float_to_bf16(x[i]);

  std::vector<std::byte> copy_src(x.size() * sizeof(float)), copy_dst(copy_src.size());
  std::memcpy(copy_src.data(), x.data(), copy_src.size());
  Mxfp8Tensor q = Mxfp8Tensor::allocate(rows, cols);
  std::vector<float> out_f32(x.size());
  std::vector<bf16_bits> out_bf16(x.size());

  std::printf("[%lld x %lld] = %.1f MiB of fp32\n", static_cast<long long>(rows),
              static_cast<long long>(cols), static_cast<double>(n) * 4.0 / (1 << 20));
  for (int threads : {1, 2}) {
    auto memcpy_time = [&](std::size_t bytes) {
      return best_seconds(
          reps, [&] { parallel_memcpy(copy_dst.data(), copy_src.data(), bytes, threads); });
    };
    const std::size_t f32_bytes = x.size() * 4, bf16_bytes = x.size() * 2;
    const std::size_t mx_bytes = q.data.size() + q.scale.size();
    const double memcpy_f32 = memcpy_time(f32_bytes);
    const double memcpy_bf16 = memcpy_time(bf16_bytes);
    const double memcpy_mx = memcpy_time(mx_bytes);
    for (auto rule : {Mxfp8ScaleRule::kCeil, Mxfp8ScaleRule::kFloor}) {
      const Mxfp8Options options{rule, Mxfp8ScaleLayout::kRowMajor, threads};
      const double t = best_seconds(reps, [&] {
        quantize_mxfp8_into({x.data(), n, DType::kFloat32}, rows, cols, q.view(), 0, 0, options);
      });
      report(rule == Mxfp8ScaleRule::kCeil ? "quantize fp32->mxfp8 (ceil)"
                                           : "quantize fp32->mxfp8 (floor)",
             threads, f32_bytes, t, memcpy_f32);
    }
    const Mxfp8Options ceil_options{Mxfp8ScaleRule::kCeil, Mxfp8ScaleLayout::kRowMajor, threads};
    const double tb = best_seconds(reps, [&] {
      quantize_mxfp8_into({xb.data(), n, DType::kBFloat16}, rows, cols, q.view(), 0, 0,
                          ceil_options);
    });
    report("quantize bf16->mxfp8 (ceil)", threads, bf16_bytes, tb, memcpy_bf16);
    Mxfp8Tensor qs = Mxfp8Tensor::allocate(rows, cols, Mxfp8ScaleLayout::kSwizzled128x4);
    const double ts = best_seconds(reps, [&] {
      quantize_mxfp8_into({xb.data(), n, DType::kBFloat16}, rows, cols, qs.view(), 0, 0,
                          ceil_options);
    });
    report("quantize bf16->mxfp8 (swizzled)", threads, bf16_bytes, ts, memcpy_bf16);
    const double td = best_seconds(reps, [&] {
      dequantize_mxfp8_into(q.view(), {out_f32.data(), n, DType::kFloat32}, threads);
    });
    report("dequantize mxfp8->fp32 (in bytes)", threads, mx_bytes, td, memcpy_mx);
    report("dequantize mxfp8->fp32 (out bytes)", threads, f32_bytes, td, memcpy_f32);
    const double tdb = best_seconds(reps, [&] {
      dequantize_mxfp8_into(q.view(), {out_bf16.data(), n, DType::kBFloat16}, threads);
    });
    report("dequantize mxfp8->bf16 (out bytes)", threads, bf16_bytes, tdb, memcpy_bf16);
  }
}

// The bench: lines. Traffic = bytes read + bytes written (MXFP8 = data + one scale byte per 32).
void print_figures(int reps) {
  const std::int64_t rows = 4096, cols = 8192;  // 64 MiB of bf16: memory-bound
  const std::int64_t n = rows * cols;
  std::vector<float> x(static_cast<std::size_t>(n));
  std::mt19937 gen(2);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  for (auto& v : x) v = normal(gen);
  std::vector<bf16_bits> xb(x.size()), out_bf16(x.size());
  float_to_bf16_n(x.data(), xb.data(), n);
  Mxfp8Tensor q = Mxfp8Tensor::allocate(rows, cols);
  const double mx_bytes = static_cast<double>(q.data.size() + q.scale.size());
  const Mxfp8Options options{Mxfp8ScaleRule::kCeil, Mxfp8ScaleLayout::kRowMajor, 1};
  // Each figure interleaves its runs with the STREAM copy probe.
  bench::StreamProbe stream;
  const auto copy = [&] { stream.copy(); };
  const bench::PairedSeconds qb = bench::best_interleaved(reps, copy, [&] {
    quantize_mxfp8_into({xb.data(), n, DType::kBFloat16}, rows, cols, q.view(), 0, 0, options);
  });
  const bench::PairedSeconds db = bench::best_interleaved(reps, copy, [&] {
    dequantize_mxfp8_into(q.view(), {out_bf16.data(), n, DType::kBFloat16}, 1);
  });
  const bench::PairedSeconds qf = bench::best_interleaved(reps, copy, [&] {
    quantize_mxfp8_into({x.data(), n, DType::kFloat32}, rows, cols, q.view(), 0, 0, options);
  });
  const double copy_gbs = bench::StreamProbe::kCopyBytes / qb.probe * 1e-9;
  // The lower ISA levels for comparison (informational, not figures).
  for (IsaLevel level : supported_isa_levels()) {
    if (level == detected_isa_level()) continue;
    ScopedIsaLevel forced(level);
    const double qb = best_seconds(reps, [&] {
      quantize_mxfp8_into({xb.data(), n, DType::kBFloat16}, rows, cols, q.view(), 0, 0, options);
    });
    const double db = best_seconds(reps, [&] {
      dequantize_mxfp8_into(q.view(), {out_bf16.data(), n, DType::kBFloat16}, 1);
    });
    const double qf = best_seconds(reps, [&] {
      quantize_mxfp8_into({x.data(), n, DType::kFloat32}, rows, cols, q.view(), 0, 0, options);
    });
    std::printf(
        "  at ISA level %-8s quantize bf16 %.2f GB/s, dequantize bf16 %.2f GB/s, quantize fp32 "
        "%.2f GB/s\n",
        std::string(isa_level_name(level)).c_str(),
        (2.0 * static_cast<double>(n) + mx_bytes) / qb * 1e-9,
        (2.0 * static_cast<double>(n) + mx_bytes) / db * 1e-9,
        (4.0 * static_cast<double>(n) + mx_bytes) / qf * 1e-9);
  }
  std::printf("figures: [%lld x %lld], 1 thread, ISA level %s, STREAM copy %.2f GB/s\n",
              static_cast<long long>(rows), static_cast<long long>(cols),
              std::string(isa_level_name(active_isa_level())).c_str(), copy_gbs);
  const double nd = static_cast<double>(n);
  const auto gbs = [](double bytes, double seconds) { return bytes / seconds * 1e-9; };
  const double copy_bytes = bench::StreamProbe::kCopyBytes;
  const auto copy_rates = [&](const bench::PairedSeconds& t) {
    return bench::ProbeSamples::of_seconds(copy_bytes * 1e-9, t.probe_samples);
  };
  bench::print_figure("mxfp8_quantize_bf16", gbs(2 * nd + mx_bytes, qb.ours), copy_rates(qb),
                      "GB/s");
  bench::print_figure("mxfp8_dequantize_bf16", gbs(2 * nd + mx_bytes, db.ours), copy_rates(db),
                      "GB/s");
  bench::print_figure("mxfp8_quantize_fp32", gbs(4 * nd + mx_bytes, qf.ours), copy_rates(qf),
                      "GB/s");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "--figures-only") {
    print_figures(9);
    return 0;
  }
  const int reps = argc > 3 ? std::atoi(argv[3]) : 9;
  if (argc > 2) {
    run(std::atoll(argv[1]), std::atoll(argv[2]), reps);
    return 0;
  }
  run(64, 1024, reps * 20);  // 256 KiB: cache-resident, measures the arithmetic
  run(4096, 4096, reps);     // 64 MiB: memory-bound
  print_figures(reps);
  return 0;
}
