// Training throughput of the reference trainer (run under `mpirun -np 4`): tokens/s of the
// default task at dp = 1, 2 and 4 (sub-worlds of the job made with split_group), and at dp = 4,
// side by side in one run: the layer-wise buffer path vs the legacy all_gather_v path, the share
// of gradient communication hidden behind backward, DP overlap on vs off, and the param
// all-gather overlapped with the optimizer step vs not. Each run trains `steps` steps (default
// 40) and drops the first `warmup` (default 5) from the timings. Rank 0 prints the table.
//
// First it prints the "bench: train_flops_3m_dp1" figure (see print_flops_figure).
//
//   mpirun -np 4 bench_train_throughput [config.yaml] [steps] [warmup]
//   bench_train_throughput --figures-only       (the figure alone; any number of ranks)
//   bench_train_throughput --muon-vs-adamw      (the layer-wise Muon step against the ZeRO-1
//                                                AdamW step, see print_muon_vs_adamw)
#include <mpi.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "machine_limits.hpp"
#include "shardwise/comm/mpi_process_group.hpp"
#include "shardwise/core/blas.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/train/synthetic_task.hpp"
#include "shardwise/train/trainer.hpp"

namespace shardwise {
namespace {

struct Timing {
  double step_ms = 0;          // mean over the measured steps
  double tokens_per_s = 0;     // tokens of the measured steps / their total time
  double hidden_fraction = 0;  // mean comm_hidden_fraction over the measured steps
  int bucket_groups = 0;
  double final_loss = 0;
  std::int64_t parameters = 0;
};

struct Variant {
  std::string label;
  std::vector<std::string> overrides;
  std::optional<bool> gather_with_step;
};

// examples/default.yaml, the tuned default task: in the source tree this bench was built from, or
// under the working directory (a copy of the repository elsewhere). Empty when neither has it.
std::string default_config_path() {
  for (const std::filesystem::path& dir :
       {std::filesystem::path(SHARDWISE_SOURCE_DIR), std::filesystem::current_path()}) {
    const std::filesystem::path path = dir / "examples" / "default.yaml";
    if (std::filesystem::exists(path)) return path.string();
  }
  return "";
}

TrainingConfig load_config(const std::string& path, std::int64_t steps,
                           const std::vector<std::string>& extra) {
  // Short runs: the LR warm-up is cut to fit (it does not change the work per step).
  std::vector<std::string> overrides = {
      str_cat("training.steps=", steps),
      str_cat("training.warmup_steps=", std::min<std::int64_t>(steps, 5)),
      "training.eval_interval=0", "logging.progress=false"};
  overrides.insert(overrides.end(), extra.begin(), extra.end());
  if (!path.empty() && std::filesystem::exists(path)) return load_training_config(path, overrides);
  if (!path.empty()) throw ConfigError(str_cat("bench config ", path, " does not exist"));
  std::printf("(examples/default.yaml not found: built-in config defaults)\n");
  return parse_training_config("{}", overrides, "<built-in defaults>");
}

// Runs on the ranks of `group` (null: this rank sits out); every rank of `world` returns
// together. Only rank 0 of the world (always in `group`) gets a meaningful result.
Timing measure(const ProcessGroupPtr& world, const ProcessGroupPtr& group,
               const TrainingConfig& config, std::optional<bool> gather_with_step, int warmup) {
  Timing t;
  if (group) {
    TrainerOptions options;
    options.quiet = true;
    options.overlap_param_gather_with_optimizer_step = gather_with_step;
    const TrainingSummary s = run_training(config, group, options);
    double ms = 0, hidden = 0, tokens = 0;
    int n = 0;
    for (const StepMetrics& m : s.steps) {
      if (m.step <= warmup) continue;
      ms += m.step_ms;
      hidden += m.comm_hidden_fraction;
      tokens += m.tokens_per_s * m.step_ms / 1e3;
      ++n;
    }
    SW_REQUIRE(n > 0, InvalidArgument, "bench: no steps left after dropping ", warmup,
               " warm-up steps");
    t.step_ms = ms / n;
    t.tokens_per_s = tokens / (ms / 1e3);
    t.hidden_fraction = hidden / n;
    t.bucket_groups = s.bucket_groups;
    t.final_loss = s.final_loss;
    t.parameters = s.parameters;
  }
  world->barrier()->wait();
  return t;
}

// A barrier that sleeps while it waits: ranks sitting out a measurement must not spin on the
// cores the measured rank runs on (this machine has 2 cores for 4 ranks).
void sleeping_barrier() {
  MPI_Request request;
  MPI_Ibarrier(MPI_COMM_WORLD, &request);
  int done = 0;
  while (MPI_Test(&request, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && !done) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

// Model FLOPs per trained token (PaLM's count): 6 per matmul weight (forward + two backward
// GEMMs) plus 12 L seq h for the attention scores and the weighted values over the full
// seq x seq square (seq: the length of the sequences that ran). With ffn = 4h this is
// Megatron-LM's 72 B s L h^2 (1 + s / 6h + V / 12 L h) per B s tokens (no recomputation): every
// GEMM of forward and backward, the LM head included. Biases, layer norms, GELU, softmax and the
// optimizer (Muon's Newton-Schulz GEMMs) are not model FLOPs and are not counted; the fp32
// attention skips the masked half of the scores but is counted over the full square, as Megatron
// counts it.
double flops_per_token(const ModelConfig& m, int vocab, double seq) {
  const double h = m.hidden, layers = m.layers;
  const double matmul_weights = layers * (4 * h * h + 2 * h * m.ffn) + vocab * h;  // + LM head
  return 6 * matmul_weights + 12 * layers * seq * h;
}

// The 3.2M-parameter model: 4 layers, hidden 256, ffn 1024 (12 L h^2 = 3.1M in the blocks).
// Each step accumulates kFlopsMicroBatches micro-batches of 512 sequences before one optimizer
// step (a workload choice: the optimizer's Newton-Schulz GEMMs, ~20 GFLOP per step on this model
// and not counted as model FLOPs, are then spread over 4x the tokens, as in real training where a
// step sees many micro-batches).
constexpr int kFlopsMicroBatches = 4;
TrainingConfig flops_config(const std::string& path, std::int64_t steps) {
  return load_config(path, steps,
                     {"model.layers=4", "model.hidden=256", "model.heads=4", "model.ffn=1024",
                      "training.micro_batch_size=512",
                      str_cat("training.grad_accumulation=", kFlopsMicroBatches)});
}

// Model FLOP/s of one training step (CPU time). The synthetic samples are shorter than
// model.seq_len: the sequence length that ran is tokens per step / sequences per step.
double step_gflops(const TrainingConfig& config, const StepMetrics& m) {
  const int vocab = config.model.vocab > 0 ? config.model.vocab : SyntheticTaskDataset::kVocab;
  const double sequences = config.training.micro_batch_size * config.training.grad_accumulation;
  const double tokens = m.tokens_per_s * m.step_ms / 1e3;
  return flops_per_token(config.model, vocab, tokens / sequences) * tokens / (m.cpu_ms / 1e3) *
         1e-9;
}

// "bench: train_flops_3m_dp1": the 3.2M-parameter model (4 micro-batches of 512 sequences of the
// default task per step) trained at dp = 1 by rank 0 with one BLAS / OpenMP thread, against a
// one-thread sgemm probe; both in CPU time (machine_limits.hpp). After each training step (the
// first one, a warm-up, aside) the probe runs sgemm back to back for as long as that step took,
// so each step has a probe window of its own length right next to it; the figure is the best
// step over the best window. A best single product (the probe the other figures use for short
// kernels) is also printed with the ratio to it: on this shared VM single products swing by about
// +-10% from one to the next, so a best of a few compares a lucky fraction of a second with a
// 7-second step (it read 0.83x-1.10x the best window over one session's runs). The other ranks
// sleep meanwhile.
constexpr int kFlopsMeasuredSteps = 4;
void print_flops_figure(const ProcessGroupPtr& world, const std::string& path) {
  const ProcessGroupPtr solo =
      split_group(world, world->rank() == 0 ? 0 : -1, world->rank(), "flops_dp1");
  if (solo) {
    const int saved_blas = blas::num_threads(), saved_omp = omp_get_max_threads();
    blas::set_num_threads(1);
    omp_set_num_threads(1);
    const double single_product = bench::sgemm_gflops();
    const TrainingConfig config = flops_config(path, 1 + kFlopsMeasuredSteps);
    TrainerOptions options;
    options.quiet = true;
    double best = 0, sum = 0;
    bench::ProbeSamples windows;
    options.on_step = [&](const StepMetrics& m) {
      if (m.step == 1) return;  // warm-up: first touches of the model's buffers
      const double gflops = step_gflops(config, m);
      const double window = bench::sgemm_gflops_sustained(m.cpu_ms / 1e3);
      std::printf(
          "train 3.2M params dp=1: step %lld, %d x %d sequences in %.2f CPU s: %.1f GF/s; "
          "sgemm over the next %.2f CPU s: %.1f GF/s\n",
          static_cast<long long>(m.step), config.training.grad_accumulation,
          config.training.micro_batch_size, m.cpu_ms / 1e3, gflops, m.cpu_ms / 1e3, window);
      best = std::max(best, gflops);
      sum += gflops;
      windows.add(window);
    };
    run_training(config, solo, options);
    std::printf(
        "train 3.2M params dp=1: best %.1f GF/s, mean %.1f GF/s over %d steps; best sgemm window "
        "%.1f GF/s (%.3f), best single sgemm product %.1f GF/s (%.3f)\n",
        best, sum / kFlopsMeasuredSteps, kFlopsMeasuredSteps, windows.best(), best / windows.best(),
        single_product, best / single_product);
    bench::print_figure("train_flops_3m_dp1", best, windows, "GF/s");
    blas::set_num_threads(saved_blas);
    omp_set_num_threads(saved_omp);
  }
  sleeping_barrier();
}

// Step times of one optimizer kind at dp = 1 (rank 0 alone, one BLAS / OpenMP thread): every
// measured step's step_ms and exposed_ms (step_ms - compute_ms).
struct KindSteps {
  std::vector<double> step_ms, exposed_ms;
};
void add_kind_steps(const TrainingConfig& config, const ProcessGroupPtr& solo, int warmup,
                    KindSteps& out) {
  TrainerOptions options;
  options.quiet = true;
  for (const StepMetrics& m : run_training(config, solo, options).steps) {
    if (m.step <= warmup) continue;
    out.step_ms.push_back(m.step_ms);
    out.exposed_ms.push_back(m.exposed_ms);
  }
}

// "bench: muon_vs_adamw_step[_small_batch] ours=<ZeRO-1 AdamW step ms> limit=<layer-wise Muon
// step ms>": the same model and tokens trained by optimizer kind distributed (AdamW, element-
// sharded) and kind layer-wise (Muon on the matrices, AdamW on the rest), runs alternated
// `rounds` times, median step; ratio = AdamW / Muon (1 = Muon costs nothing extra; Megatron
// reports Muon about 5-6% slower than Adam, i.e. about 0.95). Printed with each kind's median
// exposed time. Workloads: the train-FLOPs one (3.2M params, 4 x 512 sequences a step) and a
// small-batch one (the main job's model and batch), where the optimizer weighs most.
void print_muon_vs_adamw(const ProcessGroupPtr& world, const std::string& path) {
  const ProcessGroupPtr solo =
      split_group(world, world->rank() == 0 ? 0 : -1, world->rank(), "muon_vs_adamw");
  if (solo) {
    const int saved_blas = blas::num_threads(), saved_omp = omp_get_max_threads();
    blas::set_num_threads(1);
    omp_set_num_threads(1);
    struct Workload {
      const char* figure;
      TrainingConfig config;
      int warmup, rounds;
    };
    const Workload workloads[] = {
        {"muon_vs_adamw_step", flops_config(path, 3), 1, 2},
        {"muon_vs_adamw_step_small_batch", load_config(path, 30, {}), 5, 3},
    };
    for (const Workload& w : workloads) {
      KindSteps adamw, muon;
      for (int round = 0; round < w.rounds; ++round) {
        TrainingConfig a = w.config, m = w.config;
        a.optimizer.kind = OptimizerKind::kDistributed;
        m.optimizer.kind = OptimizerKind::kLayerWise;
        add_kind_steps(a, solo, w.warmup, adamw);
        add_kind_steps(m, solo, w.warmup, muon);
      }
      std::printf(
          "%s: median step AdamW (distributed) %.2f ms, Muon (layer-wise) %.2f ms; exposed "
          "beyond compute: AdamW %.2f ms, Muon %.2f ms (%zu steps each)\n",
          w.figure, bench::median(adamw.step_ms), bench::median(muon.step_ms),
          bench::median(adamw.exposed_ms), bench::median(muon.exposed_ms), adamw.step_ms.size());
      bench::print_figure(w.figure, bench::median(adamw.step_ms), bench::median(muon.step_ms),
                          "ms");
    }
    blas::set_num_threads(saved_blas);
    omp_set_num_threads(saved_omp);
  }
  sleeping_barrier();
}

// "bench: reproducible_reduction_step ours=<default step ms> limit=<reproducible step ms>":
// layer-wise at the full world with ddp.reproducible_reduction off and on, alternated `kRounds`
// times (best mean counts); ratio = default / reproducible (1 = the mode is free). Beside it,
// the mode's extra memory by its rule: one grad-buffer copy per micro-batch but the last, plus
// the rank partial and the all-gathered partials of the largest buffer (bounded here by the
// whole model: (accum - 1 + 1 + dp) * params * 4 bytes).
void print_reproducible_cost(const ProcessGroupPtr& world, const std::string& path,
                             std::int64_t steps, int warmup) {
  constexpr int kRounds = 3;
  const TrainingConfig plain = load_config(path, steps, {});
  const TrainingConfig reproducible = load_config(path, steps, {"ddp.reproducible_reduction=true"});
  Timing best_plain, best_reproducible;
  for (int round = 0; round < kRounds; ++round) {
    const Timing a = measure(world, world, plain, std::nullopt, warmup);
    const Timing b = measure(world, world, reproducible, std::nullopt, warmup);
    if (round == 0 || a.step_ms < best_plain.step_ms) best_plain = a;
    if (round == 0 || b.step_ms < best_reproducible.step_ms) best_reproducible = b;
  }
  if (world->rank() != 0) return;
  const std::int64_t params = best_plain.parameters;
  const int accum = plain.training.grad_accumulation, dp = world->size();
  const double extra_mib =
      static_cast<double>(accum + dp) * static_cast<double>(params) * 4.0 / (1 << 20);
  std::printf(
      "reproducible_reduction at dp=%d: step %.3f ms (default %.3f ms); extra memory at most "
      "%.2f MiB per rank (%d grad copies + %d gathered partials of %lld params); final loss "
      "%.6f vs %.6f\n",
      dp, best_reproducible.step_ms, best_plain.step_ms, extra_mib, accum, dp,
      static_cast<long long>(params), best_reproducible.final_loss, best_plain.final_loss);
  bench::print_figure("reproducible_reduction_step", best_plain.step_ms, best_reproducible.step_ms,
                      "ms");
}

int bench_main(int argc, char** argv) {
  const ProcessGroupPtr world = init_mpi_world();
  if (argc > 1 && std::string(argv[1]) == "--figures-only") {
    print_flops_figure(world, default_config_path());
    return 0;
  }
  if (argc > 1 && std::string(argv[1]) == "--muon-vs-adamw") {
    print_muon_vs_adamw(world, default_config_path());
    return 0;
  }
  if (argc > 1 && std::string(argv[1]) == "--reproducible") {
    print_reproducible_cost(world, default_config_path(), 20, 5);
    return 0;
  }
  const std::string path = argc > 1 ? argv[1] : default_config_path();
  const std::int64_t steps = argc > 2 ? std::atoll(argv[2]) : 40;
  const int warmup = argc > 3 ? std::atoi(argv[3]) : 5;
  const bool root = world->rank() == 0;
  const int world_size = world->size();
  print_flops_figure(world, path);

  // Data-parallel scaling: dp = 1, 2, 4 (as far as the job has ranks).
  std::vector<std::pair<int, Timing>> scaling;
  for (int dp = 1; dp <= world_size; dp *= 2) {
    const ProcessGroupPtr sub =
        split_group(world, world->rank() < dp ? 0 : -1, world->rank(), str_cat("dp", dp));
    scaling.emplace_back(dp,
                         measure(world, sub, load_config(path, steps, {}), std::nullopt, warmup));
  }

  // At the full world: the variants side by side, each run kRounds times in alternation (the
  // best mean counts) so a slow spell of the machine does not land on one variant only.
  constexpr int kRounds = 3;
  const std::vector<Variant> variants = {
      {"layer-wise, overlap on (resolved default)", {}, std::nullopt},
      // Same buckets, set in the ddp section (comm_overlap's DP fields only apply to the
      // distributed optimizers).
      {"legacy-layer-wise (all_gather_v sync)",
       {"optimizer.kind=legacy-layer-wise", "comm_overlap.bucket_size=null",
        "ddp.bucket_size=16384"},
       std::nullopt},
      {"layer-wise, DP overlap off",
       {"comm_overlap.overlap_grad_reduce=false", "comm_overlap.overlap_param_gather=false"},
       std::nullopt},
      {"layer-wise, overlap on + gather with opt step", {}, true},
  };
  std::vector<Timing> best(variants.size());
  for (int round = 0; round < kRounds; ++round) {
    for (std::size_t v = 0; v < variants.size(); ++v) {
      const Timing t = measure(world, world, load_config(path, steps, variants[v].overrides),
                               variants[v].gather_with_step, warmup);
      if (round == 0 || t.step_ms < best[v].step_ms) best[v] = t;
    }
  }

  print_reproducible_cost(world, path, steps, warmup);

  if (root) {
    const TrainingConfig c = load_config(path, steps, {});
    std::printf("train_throughput: %s, %lld steps (first %d dropped), micro batch %d, seq %d\n",
                std::filesystem::exists(path) ? path.c_str() : "built-in defaults",
                static_cast<long long>(steps), warmup, c.training.micro_batch_size,
                c.model.seq_len);
    std::printf("\n%-6s %12s %14s %12s %16s\n", "dp", "step ms", "tokens/s", "vs dp=1",
                "hidden (mean)");
    for (const auto& [dp, t] : scaling) {
      std::printf("%-6d %12.3f %14.0f %11.2fx %16.3f\n", dp, t.step_ms, t.tokens_per_s,
                  t.tokens_per_s / scaling.front().second.tokens_per_s, t.hidden_fraction);
    }
    std::printf("\nat dp=%d (best of %d alternating runs):\n%-48s %10s %14s %8s %13s %12s\n",
                world_size, kRounds, "variant", "step ms", "tokens/s", "groups", "hidden (mean)",
                "final loss");
    for (std::size_t v = 0; v < variants.size(); ++v) {
      const Timing& t = best[v];
      std::printf("%-48s %10.3f %14.0f %8d %13.3f %12.6f\n", variants[v].label.c_str(), t.step_ms,
                  t.tokens_per_s, t.bucket_groups, t.hidden_fraction, t.final_loss);
    }
    const Timing& buffer = best[0];
    std::printf("\nlegacy / layer-wise step time:            %.3f\n",
                best[1].step_ms / buffer.step_ms);
    std::printf("overlap off / overlap on step time:       %.3f\n",
                best[2].step_ms / buffer.step_ms);
    std::printf("gather-with-step / plain overlap step time: %.3f\n",
                best[3].step_ms / buffer.step_ms);
    std::printf("mean comm_hidden_fraction (layer-wise, overlap on): %.3f\n",
                buffer.hidden_fraction);
    if (world_size < 4) std::printf("(run under mpirun -np 4 for the dp=4 figures)\n");
  }
  return 0;
}

}  // namespace
}  // namespace shardwise

int main(int argc, char** argv) {
  return shardwise::run_rank_main([&] { return shardwise::bench_main(argc, argv); });
}
