// Newton–Schulz throughput against plain BLAS sgemm on the same shapes, measured side by side.
//
// Baseline: the GEMMs of one orthogonalization issued as plain sgemm calls (per step X X^T,
// A A and B X: 4 m^2 n + 2 m^3 flops, m the short side). Ours: NewtonSchulz::orthogonalize
// (normalisation, ssyrk for the symmetric products, the elementwise work, everything). Rates are
// those nominal GEMM flops divided by wall time, so ratio = baseline time / our time; with ssyrk
// ours does fewer flops (3 m^2 n + m^3 per step) and can pass 1.0. The "gemm only" column
// disables ssyrk, showing the overhead of everything that is not a GEMM.
//
// Usage: bench_newton_schulz [--shapes 1024x1024,4096x1024] [--budget-s 50] | --figures-only |
//        --gram-only | --gram-checkpoint FILE
// Threads: OPENBLAS_NUM_THREADS (default: all cores). Shapes that would not fit in the time
// budget at the measured rate are reported as skipped.
// Then the Gram iteration against the standard one (fp32, quintic, 5 steps, both with ssyrk):
//   bench: newton_schulz_gram_<rows>x<cols> ours=<standard ms> limit=<gram ms> unit=ms ratio=...
// for a square, an FFN-shaped (1:3.5) and a QKV-like (1:4) matrix, ratio = standard time / gram
// time (goal >= 1.54, i.e. 35% less time, on the FFN shape), with the orthogonality errors ||U U^T
// - I|| / sqrt(m) of both on a random matrix and on one with a decaying spectrum (singular values 1
// .. 1e-3, as trained weights' gradients have) printed beside. `--gram-only` runs just these. Last,
// the "bench: newton_schulz_1t" figure: one BLAS thread, 1024x1024, nominal GEMM GF/s of the
// orthogonalization against a one-thread 2048^3 sgemm probe, runs interleaved.
#include "shardwise/optim/newton_schulz.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "machine_limits.hpp"
#include "shardwise/checkpoint/safetensors.hpp"
#include "shardwise/core/blas.hpp"
#include "shardwise/optim/newton_schulz_gram.hpp"

namespace {

using shardwise::optim::MatmulPrecision;
using shardwise::optim::NewtonSchulz;
using shardwise::optim::NewtonSchulzOptions;
using Clock = std::chrono::steady_clock;
namespace blas = shardwise::blas;

struct Shape {
  std::int64_t rows, cols;
};

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// The GEMMs of `steps` Newton–Schulz steps as plain sgemm calls.
void plain_sgemm_steps(const std::vector<float>& x, std::int64_t m, std::int64_t n, int steps,
                       std::vector<float>& gram, std::vector<float>& poly, std::vector<float>& y) {
  using blas::Op;
  for (int s = 0; s < steps; ++s) {
    blas::sgemm(Op::kNone, Op::kTranspose, m, m, n, 1.0f, x.data(), n, x.data(), n, 0.0f,
                gram.data(), m);
    blas::sgemm(Op::kNone, Op::kNone, m, m, m, 1.0f, gram.data(), m, gram.data(), m, 0.5f,
                poly.data(), m);
    blas::sgemm(Op::kNone, Op::kNone, m, n, m, 1.0f, poly.data(), m, x.data(), n, 0.0f, y.data(),
                n);
  }
}

std::vector<Shape> parse_shapes(const std::string& text) {
  std::vector<Shape> out;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t comma = std::min(text.find(',', pos), text.size());
    const std::string item = text.substr(pos, comma - pos);
    const std::size_t x = item.find('x');
    if (x == std::string::npos) {
      std::fprintf(stderr, "bad shape '%s' (want RxC)\n", item.c_str());
      std::exit(2);
    }
    out.push_back({std::stoll(item.substr(0, x)), std::stoll(item.substr(x + 1))});
    pos = comma + 1;
  }
  return out;
}

void print_figure_one_thread(int steps) {
  const int saved_threads = blas::num_threads();
  blas::set_num_threads(1);
  const std::int64_t rows = 1024, cols = 1024;
  std::vector<float> g(static_cast<std::size_t>(rows * cols)), out(g.size());
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (float& v : g) v = dist(rng);
  NewtonSchulz ns(NewtonSchulzOptions{});
  const double gflop = shardwise::optim::newton_schulz_gemm_flops(rows, cols, steps) / 1e9;
  // The sgemm probe (2048^3) interleaved with the orthogonalizations.
  const std::int64_t n = 2048;
  std::vector<float> a(static_cast<std::size_t>(n * n), 0.5f), b(a.size(), 0.25f), c(a.size());
  const auto t = shardwise::bench::best_interleaved(
      5,
      [&] {
        blas::sgemm(blas::Op::kNone, blas::Op::kNone, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f,
                    c.data(), n);
      },
      [&] { ns.orthogonalize(g.data(), rows, cols, out.data()); });
  const double sgemm_gflop = 2.0 * static_cast<double>(n * n) * static_cast<double>(n) / 1e9;
  std::printf("figure: %lldx%lld, %d steps, 1 BLAS thread\n", static_cast<long long>(rows),
              static_cast<long long>(cols), steps);
  // Against the best of the interleaved sgemm probes, with their spread.
  shardwise::bench::print_figure(
      "newton_schulz_1t", gflop / t.ours,
      shardwise::bench::ProbeSamples::of_seconds(sgemm_gflop, t.probe_samples), "GF/s");
  blas::set_num_threads(saved_threads);
}

// G = A diag(s) B with Gaussian A (rows x r), B (r x cols) and s from 1 down to `smallest`
// geometrically: a spectrum spread over three decades, as gradients dominated by a few
// directions have (cheaper to make than exact singular vectors at this size).
std::vector<float> decaying_spectrum(std::int64_t rows, std::int64_t cols, double smallest,
                                     std::mt19937& rng) {
  const std::int64_t r = std::min(rows, cols);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> a(static_cast<std::size_t>(rows * r)), b(static_cast<std::size_t>(r * cols));
  for (float& v : a) v = dist(rng);
  for (float& v : b) v = dist(rng);
  for (std::int64_t k = 0; k < r; ++k) {
    const auto s = static_cast<float>(std::pow(smallest, double(k) / double(r - 1)));
    for (std::int64_t i = 0; i < rows; ++i) a[static_cast<std::size_t>(i * r + k)] *= s;
  }
  std::vector<float> g(static_cast<std::size_t>(rows * cols));
  blas::sgemm(blas::Op::kNone, blas::Op::kNone, rows, cols, r, 1.0f, a.data(), r, b.data(), cols,
              0.0f, g.data(), cols);
  return g;
}

// Standard and Gram Newton-Schulz side by side (fp32, default coefficients and steps).
void print_gram_figures() {
  using shardwise::optim::NsAlgorithm;
  std::mt19937 rng(5);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::printf("Gram Newton-Schulz (fp32, quintic, 5 steps, ssyrk): time and ||UU^T-I||/sqrt(m)\n");
  for (const Shape& s : {Shape{1024, 1024}, Shape{1024, 3584}, Shape{1024, 4096}}) {
    std::vector<float> random(static_cast<std::size_t>(s.rows * s.cols)), out(random.size());
    for (float& v : random) v = dist(rng);
    const std::vector<float> decaying = decaying_spectrum(s.rows, s.cols, 1e-3, rng);
    NewtonSchulzOptions standard_opts, gram_opts;
    gram_opts.algorithm = NsAlgorithm::kGram;
    NewtonSchulz standard(standard_opts), gram(gram_opts);
    standard.orthogonalize(random.data(), s.rows, s.cols, out.data());  // warm up
    gram.orthogonalize(random.data(), s.rows, s.cols, out.data());
    double best_standard = 1e30, best_gram = 1e30;
    for (int rep = 0; rep < 3; ++rep) {  // interleaved, as above
      Clock::time_point t0 = Clock::now();
      standard.orthogonalize(random.data(), s.rows, s.cols, out.data());
      best_standard = std::min(best_standard, seconds_since(t0));
      t0 = Clock::now();
      gram.orthogonalize(random.data(), s.rows, s.cols, out.data());
      best_gram = std::min(best_gram, seconds_since(t0));
    }
    double errors[2][2];  // [input][standard, gram]
    const std::vector<float>* inputs[] = {&random, &decaying};
    for (int i = 0; i < 2; ++i) {
      standard.orthogonalize(inputs[i]->data(), s.rows, s.cols, out.data());
      errors[i][0] = shardwise::optim::orthogonality_error(out.data(), s.rows, s.cols);
      gram.orthogonalize(inputs[i]->data(), s.rows, s.cols, out.data());
      errors[i][1] = shardwise::optim::orthogonality_error(out.data(), s.rows, s.cols);
    }
    std::printf(
        "%5lldx%-5lld orthogonality random: standard %.4e gram %.4e; decaying spectrum: "
        "standard %.4e gram %.4e\n",
        (long long)s.rows, (long long)s.cols, errors[0][0], errors[0][1], errors[1][0],
        errors[1][1]);
    const std::string name =
        "newton_schulz_gram_" + std::to_string(s.rows) + "x" + std::to_string(s.cols);
    shardwise::bench::print_figure(name.c_str(), best_standard * 1e3, best_gram * 1e3, "ms");
  }
}

// Standard against Gram on the momentum buffers of a trained checkpoint.
int print_checkpoint_errors(const char* path) {
  using shardwise::optim::NsAlgorithm;
  const auto file = shardwise::SafetensorsFile::open(path);
  const std::string suffix = "/momentum_buffer";
  for (const shardwise::SafetensorsTensorInfo& info : file.tensors()) {
    if (info.shape.size() != 2 || info.name.size() < suffix.size() ||
        info.name.compare(info.name.size() - suffix.size(), suffix.size(), suffix) != 0) {
      continue;
    }
    const std::int64_t rows = info.shape[0], cols = info.shape[1];
    std::vector<float> g(static_cast<std::size_t>(rows * cols)), out(g.size());
    file.read_range(info.name, 0, shardwise::TensorView{g.data(), rows * cols});
    std::printf("trained momentum %-40s %4lldx%-4lld", info.name.c_str(), (long long)rows,
                (long long)cols);
    for (MatmulPrecision p : {MatmulPrecision::kFp32, MatmulPrecision::kBf16}) {
      double errors[2];
      for (NsAlgorithm a : {NsAlgorithm::kStandard, NsAlgorithm::kGram}) {
        NewtonSchulzOptions o;
        o.precision = p;
        o.algorithm = a;
        NewtonSchulz(o).orthogonalize(g.data(), rows, cols, out.data());
        errors[a == NsAlgorithm::kGram] =
            shardwise::optim::orthogonality_error(out.data(), rows, cols);
      }
      std::printf("  %s ||UU^T-I||/sqrt(m) standard %.4e gram %.4e",
                  p == MatmulPrecision::kBf16 ? "bf16" : "fp32", errors[0], errors[1]);
    }
    std::printf("\n");
  }
  return 0;
}

// Best times of one shape's variants: plain sgemm steps of the same nominal flops (the
// baseline), Newton-Schulz with SYRK, with GEMM only, and with bf16 products.
struct VariantTimes {
  double base = 1e30, syrk = 1e30, gemm = 1e30, bf16 = 1e30;
};

VariantTimes time_variants(const Shape& shape, int steps, int reps, std::mt19937& rng,
                           Clock::time_point start, double budget_s) {
  const std::int64_t m = std::min(shape.rows, shape.cols), n = std::max(shape.rows, shape.cols);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> g(static_cast<std::size_t>(m * n)), out(g.size()), y(g.size());
  for (float& v : g) v = dist(rng);
  std::vector<float> gram(static_cast<std::size_t>(m * m)), poly(gram.size());
  NewtonSchulzOptions syrk_opts, gemm_opts, bf16_opts;
  gemm_opts.use_syrk = false;
  bf16_opts.precision = MatmulPrecision::kBf16;
  NewtonSchulz ns_syrk(syrk_opts), ns_gemm(gemm_opts), ns_bf16(bf16_opts);
  // Warm up (allocations, BLAS thread pool).
  ns_syrk.orthogonalize(g.data(), shape.rows, shape.cols, out.data());
  VariantTimes best;
  auto time = [](double& slot, auto&& run) {
    const Clock::time_point t0 = Clock::now();
    run();
    slot = std::min(slot, seconds_since(t0));
  };
  for (int rep = 0; rep < reps; ++rep) {
    // Interleaved, so load changes from other processes hit every variant alike.
    time(best.base, [&] { plain_sgemm_steps(g, m, n, steps, gram, poly, y); });
    time(best.syrk, [&] { ns_syrk.orthogonalize(g.data(), shape.rows, shape.cols, out.data()); });
    time(best.gemm, [&] { ns_gemm.orthogonalize(g.data(), shape.rows, shape.cols, out.data()); });
    time(best.bf16, [&] { ns_bf16.orthogonalize(g.data(), shape.rows, shape.cols, out.data()); });
    if (rep >= 1 && seconds_since(start) > budget_s) break;
  }
  return best;
}

void print_blas_setup(int steps) {
  const char* env_threads = std::getenv("OPENBLAS_NUM_THREADS");
  std::printf("BLAS: %s\n", blas::library_config().c_str());
  std::printf(
      "BLAS threads: %d (OPENBLAS_NUM_THREADS=%s); Newton-Schulz: quintic, %d steps, fp32\n",
      blas::num_threads(), env_threads ? env_threads : "unset", steps);
  if (blas::library_config().find("core=Prescott") != std::string::npos) {
    std::printf(
        "note: OpenBLAS fell back to its generic Prescott kernels (CPU model unknown to "
        "this OpenBLAS); OPENBLAS_CORETYPE=SkylakeX or Haswell is ~3x faster here\n");
  }
}

// The table: per shape, sgemm and Newton-Schulz GFLOP/s and their ratios, within budget_s.
void print_shape_table(const std::vector<Shape>& shapes, int steps, double budget_s) {
  std::printf("%-11s %10s %12s %8s %12s %8s %12s %8s %9s\n", "shape", "GFLOP", "sgemm GF/s", "",
              "NS GF/s", "ratio", "NS-gemm GF/s", "ratio", "bf16 ratio");
  const Clock::time_point start = Clock::now();
  std::mt19937 rng(1);
  double rate_estimate = 0.0;  // GFLOP/s seen so far, to predict whether a shape fits
  for (const Shape& shape : shapes) {
    const double gflop =
        shardwise::optim::newton_schulz_gemm_flops(shape.rows, shape.cols, steps) / 1e9;
    const double remaining = budget_s - seconds_since(start);
    // Each repetition runs four variants of about the same cost; at least two repetitions.
    const int reps = gflop > 50.0 ? 2 : 3;
    if (rate_estimate > 0.0 && 8.0 * gflop / rate_estimate > remaining) {
      std::printf(
          "%5lldx%-5lld %10.1f   skipped: ~%.0f s needed at %.1f GFLOP/s, %.0f s of budget left\n",
          (long long)shape.rows, (long long)shape.cols, gflop, 8.0 * gflop / rate_estimate,
          rate_estimate, std::max(0.0, remaining));
      continue;
    }
    const VariantTimes t = time_variants(shape, steps, reps, rng, start, budget_s);
    rate_estimate = gflop / t.base;
    std::printf("%5lldx%-5lld %10.1f %12.1f %8s %12.1f %8.2f %12.1f %8.2f %9.2f\n",
                (long long)shape.rows, (long long)shape.cols, gflop, gflop / t.base, "",
                gflop / t.syrk, t.base / t.syrk, gflop / t.gemm, t.base / t.gemm, t.base / t.bf16);
    std::fflush(stdout);
  }
  std::printf(
      "ratio = plain sgemm time / Newton-Schulz time for the same nominal GEMM flops "
      "(target >= 0.85); best of up to 3 interleaved runs; total %.1f s\n",
      seconds_since(start));
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<Shape> shapes = {{1024, 1024}, {4096, 1024}, {1024, 4096}, {2048, 8192}};
  double budget_s = 50.0;
  if (argc > 1 && std::string(argv[1]) == "--figures-only") {
    print_figure_one_thread(5);
    return 0;
  }
  if (argc > 2 && std::string(argv[1]) == "--gram-checkpoint") {
    return print_checkpoint_errors(argv[2]);
  }
  if (argc > 1 && std::string(argv[1]) == "--gram-only") {
    print_gram_figures();
    return 0;
  }
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--shapes")
      shapes = parse_shapes(argv[i + 1]);
    else if (flag == "--budget-s")
      budget_s = std::atof(argv[i + 1]);
  }
  const int steps = 5;
  print_blas_setup(steps);
  print_shape_table(shapes, steps, budget_s);
  print_gram_figures();
  print_figure_one_thread(steps);
  return 0;
}
