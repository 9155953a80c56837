// One synthetic training step through DistributedDataParallel, run side by side for
//   buffer path: grads reduce-scattered into each rank's shard, params all-gathered in place, and
//   legacy path (Megatron-LM PR 4509's baseline): grads all-reduced, params synced by
//   flatten / all_gather_v / unflatten.
// "Backward" visits params in backprop order, writing each gradient with `passes` sweeps of
// arithmetic (simulated compute) and registering it ready, so bucket collectives overlap it.
//
//   mpirun -np 4 bench_ddp_step [--mode all|compare|overlap|optimizer] [--layers 4] [--hidden 384]
//                               [--bucket 2000000] [--passes 8] [--iters 5]
//
// compare: step time and bytes per rank of both paths and their ratios.
// overlap: how much of the reduce-scatter time backward compute hides: time spent waiting in
//          finish_grad_sync with overlap_grad_reduce vs the whole reduce-scatter time without;
//          then `bench: ddp_step_comm_<dp>r`: that reduce-scatter's bus bandwidth (median grad
//          wait over the steps) vs an MPI ping-pong of one bucket's shard (machine_limits.hpp).
// optimizer: whole steps (forward, backward, grad sync, layer-wise Muon + AdamW step) with the
//          param all-gather started after the step (overlap_param_gather: hidden behind the next
//          forward) or during it (overlap_param_gather_with_optimizer_step: group k's gather
//          behind group k+1's Newton-Schulz), against the same steps without an optimizer
//          (compute-only); `bench: ddp_step_exposed_optimizer_<dp>r`: the exposed optimizer time
//          per step (step - compute-only step) during vs after the step.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bench_harness.hpp"
#include "machine_limits.hpp"
#include "shardwise/comm/mpi_process_group.hpp"
#include "shardwise/core/float_convert.hpp"
#include "shardwise/ddp/distributed_data_parallel.hpp"
#include "shardwise/layout/layout_algorithms.hpp"
#include "shardwise/layout/model_zoo.hpp"
#include "shardwise/optim/data_parallel_setup.hpp"

namespace {

using namespace shardwise;
using namespace shardwise::optim;
using bench::Clock;
using bench::median;
using bench::seconds_since;

struct Options {
  std::string mode = "all";
  int layers = 4;
  std::int64_t hidden = 384;
  std::int64_t bucket = 2'000'000;
  int passes = 8;
  int iters = 5;
};

Options parse(int argc, char** argv) {
  Options o;
  bench::parse_bench_options("bench_ddp_step", argc, argv,
                             {{"--mode", &o.mode},
                              {"--layers", &o.layers},
                              {"--hidden", &o.hidden},
                              {"--bucket", &o.bucket},
                              {"--passes", &o.passes},
                              {"--iters", &o.iters}});
  SW_REQUIRE(o.mode == "all" || o.mode == "compare" || o.mode == "overlap" || o.mode == "optimizer",
             InvalidArgument,
             "bench_ddp_step: --mode must be all, compare, overlap or optimizer, got ", o.mode);
  return o;
}

ParamList bench_model(const Options& o) {
  TransformerConfig c;
  c.name = "ddp-bench";
  c.num_layers = o.layers;
  c.hidden_size = o.hidden;
  c.ffn_hidden_size = 4 * o.hidden;
  c.num_attention_heads = 8;
  c.vocab_size = 8192;
  c.dtype = DType::kBFloat16;
  return generate_transformer_params(c);
}

// Simulated backward for one param: `passes` arithmetic sweeps over its fp32 gradient.
void compute_grad(const TensorView& grad, int rank, int passes) {
  float* g = grad.as<float>();
  const float seed = 0.001f * static_cast<float>(rank + 1);
  for (std::int64_t i = 0; i < grad.numel; ++i) g[i] = seed * static_cast<float>(i % 97);
  for (int p = 0; p < passes; ++p) {
    for (std::int64_t i = 0; i < grad.numel; ++i) g[i] = g[i] * 0.999f + seed;
  }
}

struct StepTimes {
  double backward = 0;    // compute + registration (includes dispatch of overlapped buckets)
  double grad_wait = 0;   // finish_grad_sync
  double param_sync = 0;  // start_param_sync / legacy_param_sync
  double total() const { return backward + grad_wait + param_sync; }
  std::int64_t bytes_sent = 0;
};

float max_over_ranks(const ProcessGroupPtr& world, double value) {
  float v = static_cast<float>(value);
  world->all_reduce({&v, 1, DType::kFloat32}, ReduceOp::kMax)->wait();
  return v;
}

struct Path {
  DistributedDataParallel* ddp;
  const std::map<ParamId, int>* legacy_owner;  // null: buffer all-gather
};

StepTimes one_step(const Path& path, const ProcessGroupPtr& world, const Options& o) {
  DistributedDataParallel& ddp = *path.ddp;
  const std::size_t n = ddp.params().size();
  ddp.zero_grad_buffer();
  world->barrier()->wait();
  world->reset_traffic();
  StepTimes t;
  auto t0 = Clock::now();
  for (ParamId id = n; id-- > 0;) {
    compute_grad(ddp.main_grad(id), world->rank(), o.passes);
    ddp.register_grad_ready(id);
  }
  t.backward = seconds_since(t0);
  // Without overlap every reduce-scatter runs inside finish_grad_sync: start it together on all
  // ranks, so the figure measures the communication, not how unevenly backward finished.
  if (!ddp.config().overlap_grad_reduce) world->barrier()->wait();
  t0 = Clock::now();
  ddp.finish_grad_sync();
  t.grad_wait = seconds_since(t0);
  t0 = Clock::now();
  if (path.legacy_owner) {
    ddp.legacy_param_sync(*path.legacy_owner);
  } else {
    ddp.start_param_sync();
  }
  t.param_sync = seconds_since(t0);
  t.bytes_sent = world->traffic().total_sent();
  t.backward = max_over_ranks(world, t.backward);
  t.grad_wait = max_over_ranks(world, t.grad_wait);
  t.param_sync = max_over_ranks(world, t.param_sync);
  return t;
}

// Runs the paths' steps interleaved (so load from other processes hits them alike) and returns
// every path's steps after one warm-up round.
std::vector<std::vector<StepTimes>> run_interleaved(const std::vector<Path>& paths,
                                                    const ProcessGroupPtr& world,
                                                    const Options& o) {
  std::vector<std::vector<StepTimes>> samples(paths.size());
  for (int it = 0; it <= o.iters; ++it) {
    for (std::size_t p = 0; p < paths.size(); ++p) {
      const StepTimes t = one_step(paths[p], world, o);
      if (it > 0) samples[p].push_back(t);
    }
  }
  return samples;
}

// Per path the median step (by total time, slowest rank).
std::vector<StepTimes> median_steps(std::vector<std::vector<StepTimes>> samples) {
  std::vector<StepTimes> medians;
  for (auto& s : samples) {
    std::sort(s.begin(), s.end(),
              [](const StepTimes& a, const StepTimes& b) { return a.total() < b.total(); });
    medians.push_back(s[s.size() / 2]);
  }
  return medians;
}

// --- optimizer mode ---

// One DDP (layer-wise layout, reduce-scatter overlapped with backward, gathers overlapped with
// the forward) and, unless compute-only, the layer-wise Muon + AdamW optimizer over it.
struct OptimizerRig {
  std::unique_ptr<DistributedDataParallel> ddp;
  std::unique_ptr<Optimizer> optimizer;  // null: compute-only
};

OptimizerRig make_optimizer_rig(const ParamList& params, const ProcessGroupPtr& world,
                                const Options& o, bool with_optimizer, bool gather_during_step) {
  DistributedDataParallelConfig config;
  config.overlap_grad_reduce = true;
  config.overlap_param_gather = true;
  config.bucket_size = o.bucket;
  auto ddps = wrap_with_ddp({params}, OptimizerKind::kLayerWise, config,
                            DataParallelGroups{world, nullptr});
  OptimizerRig rig;
  rig.ddp = std::move(ddps.front());
  // Small nonzero weights, the same on every rank (Newton-Schulz of zeros would be trivial).
  for (ParamId id = 0; id < params.size(); ++id) {
    const TensorView v = rig.ddp->param(id);
    auto* p = v.as<bf16_bits>();
    for (std::int64_t i = 0; i < v.numel; ++i) {
      p[i] = float_to_bf16(0.01f * static_cast<float>((i * 7 + id) % 13) - 0.06f);
    }
  }
  if (with_optimizer) {
    rig.optimizer = make_optimizer(OptimizerKind::kLayerWise, {rig.ddp.get()}, MuonOptions{},
                                   AdamWOptions{}, world, gather_during_step);
  }
  return rig;
}

// Simulated forward for one param: waits for its group's gather, then `passes` sweeps reading it.
float forward_param(DistributedDataParallel& ddp, ParamId id, int passes) {
  ddp.finish_param_sync(ddp.bucket_group_of(id));
  const TensorView v = ddp.param(id);
  const auto* p = v.as<bf16_bits>();
  float acc = 0;
  for (int pass = 0; pass < passes; ++pass) {
    for (std::int64_t i = 0; i < v.numel; ++i) acc = acc * 0.999f + bf16_to_float(p[i]);
  }
  return acc;
}

// One whole step's wall time (slowest rank): forward, backward, grad sync, optimizer step.
double whole_step(OptimizerRig& rig, const ProcessGroupPtr& world, const Options& o) {
  DistributedDataParallel& ddp = *rig.ddp;
  const std::size_t n = ddp.params().size();
  world->barrier()->wait();
  const auto t0 = Clock::now();
  volatile float sink = 0;
  for (ParamId id = 0; id < n; ++id) sink = sink + forward_param(ddp, id, o.passes);
  ddp.zero_grad_buffer();
  for (ParamId id = n; id-- > 0;) {
    compute_grad(ddp.main_grad(id), world->rank(), o.passes);
    ddp.register_grad_ready(id);
  }
  ddp.finish_grad_sync();
  if (rig.optimizer) rig.optimizer->step();
  return max_over_ranks(world, seconds_since(t0));
}

// Step times of the rigs, interleaved per iteration, after one warm-up round.
std::vector<std::vector<double>> whole_steps_interleaved(std::vector<OptimizerRig>& rigs,
                                                         const ProcessGroupPtr& world,
                                                         const Options& o) {
  std::vector<std::vector<double>> samples(rigs.size());
  for (int it = 0; it <= o.iters; ++it) {
    for (std::size_t r = 0; r < rigs.size(); ++r) {
      const double t = whole_step(rigs[r], world, o);
      if (it > 0) samples[r].push_back(t);
    }
  }
  return samples;
}

// Median over iterations of (step - the same iteration's compute-only step), in ms.
double median_exposed_ms(const std::vector<double>& steps, const std::vector<double>& compute) {
  std::vector<double> exposed;
  for (std::size_t i = 0; i < steps.size(); ++i) exposed.push_back(1e3 * (steps[i] - compute[i]));
  return median(exposed);
}

void run_optimizer_mode(const ParamList& params, const ProcessGroupPtr& world, const Options& o) {
  std::vector<OptimizerRig> rigs;
  rigs.push_back(make_optimizer_rig(params, world, o, false, false));  // compute-only
  rigs.push_back(make_optimizer_rig(params, world, o, true, false));   // gather after the step
  rigs.push_back(make_optimizer_rig(params, world, o, true, true));    // gather during the step
  const auto samples = whole_steps_interleaved(rigs, world, o);
  if (world->rank() != 0) return;
  const double after = median_exposed_ms(samples[1], samples[0]);
  const double during = median_exposed_ms(samples[2], samples[0]);
  std::printf("optimizer (layer-wise Muon + AdamW, %zu bucket groups; slowest rank, median step)\n",
              rigs[0].ddp->bucket_groups().size());
  std::printf("  compute only (no optimizer):          step %8.2f ms\n", 1e3 * median(samples[0]));
  std::printf("  gather after the step (next forward): step %8.2f ms, exposed %7.2f ms\n",
              1e3 * median(samples[1]), after);
  std::printf("  gather during the step:               step %8.2f ms, exposed %7.2f ms\n",
              1e3 * median(samples[2]), during);
  // ours = gather during the step, limit = the overlap_param_gather baseline (after the step).
  bench::print_figure(str_cat("ddp_step_exposed_optimizer_", world->size(), "r").c_str(), during,
                      after, "ms");
}

// compare: the buffer path against the legacy all-reduce / all_gather_v path.
void run_compare_mode(const ParamList& params, const FullParamLayout& layout,
                      const DistributedDataParallelConfig& buffered, const ProcessGroupPtr& world,
                      const Options& o) {
  const int dp = world->size();
  const bool root = world->rank() == 0;
  DistributedDataParallelConfig legacy = buffered;
  legacy.use_distributed_optimizer = false;
  legacy.use_legacy_param_sync = true;
  const std::map<ParamId, int> owner = ping_pong_owner_map(params, layout, dp, dp);
  DistributedDataParallel ours_ddp(params, layout, buffered, {world, nullptr});
  DistributedDataParallel base_ddp(params, layout, legacy, {world, nullptr});
  const std::vector<StepTimes> t =
      median_steps(run_interleaved({{&ours_ddp, nullptr}, {&base_ddp, &owner}}, world, o));
  const StepTimes& ours = t[0];
  const StepTimes& base = t[1];
  if (root) {
    auto row = [](const char* name, const StepTimes& t) {
      std::printf(
          "  %-34s step %8.2f ms (backward %7.2f, grad wait %7.2f, param sync %7.2f)"
          "  sent %8.2f MB/rank\n",
          name, 1e3 * t.total(), 1e3 * t.backward, 1e3 * t.grad_wait, 1e3 * t.param_sync,
          static_cast<double>(t.bytes_sent) / 1e6);
    };
    std::printf("compare (rank 0 bytes; times: slowest rank, median step)\n");
    row("buffer reduce-scatter/all-gather", ours);
    row("legacy all-reduce/all_gather_v", base);
    std::printf(
        "  ratio buffer/legacy: time %.3f, comm time (grad wait + param sync) %.3f, "
        "bytes %.3f\n",
        ours.total() / base.total(),
        (ours.grad_wait + ours.param_sync) / (base.grad_wait + base.param_sync),
        static_cast<double>(ours.bytes_sent) / static_cast<double>(base.bytes_sent));
  }
}

// overlap: the reduce-scatter path with and without overlap_grad_reduce.
void run_overlap_mode(const ParamList& params, const FullParamLayout& layout,
                      const DistributedDataParallelConfig& buffered, std::int64_t numel,
                      const ProcessGroupPtr& world, const Options& o) {
  const int dp = world->size();
  const bool root = world->rank() == 0;
  DistributedDataParallelConfig no_overlap = buffered;
  no_overlap.overlap_grad_reduce = false;
  DistributedDataParallelConfig private_buffers = no_overlap;
  private_buffers.symmetric_buffers = false;
  DistributedDataParallel serial_ddp(params, layout, no_overlap, {world, nullptr});
  DistributedDataParallel overlapped_ddp(params, layout, buffered, {world, nullptr});
  DistributedDataParallel private_ddp(params, layout, private_buffers, {world, nullptr});
  // The figure: bus bandwidth of the step's reduce-scatters ((dp-1)/dp of the fp32 grad
  // buffer over the non-overlapped grad wait, median over the steps) vs an MPI ping-pong of
  // one bucket's shard; `_private_buffers`: the same with ddp.symmetric_buffers off (the grads
  // copied through the group's segment instead of read in place).
  // The ping-pong limit is probed before and after the steps (its best divides), and so is the
  // reduce-scatter's memory bound (bench::collective_memory_bound_gbs).
  const std::size_t shard_bytes =
      static_cast<std::size_t>(std::max<std::int64_t>(o.bucket / dp, 1) * 4);
  bench::ProbeSamples limit, memory_bound;
  bench::StreamProbe stream;
  auto probe = [&] {
    // The step's reduce-scatters go through the whole fp32 grad buffer.
    limit.add(bench::mpi_ping_pong_gbps(shard_bytes, o.iters, static_cast<std::size_t>(numel) * 4));
    memory_bound.add(bench::collective_memory_bound_gbs(stream, dp));
  };
  probe();
  const auto samples = run_interleaved(
      {{&serial_ddp, nullptr}, {&overlapped_ddp, nullptr}, {&private_ddp, nullptr}}, world, o);
  probe();
  const std::vector<StepTimes> t = median_steps(samples);
  const StepTimes& serial = t[0];
  const StepTimes& overlapped = t[1];
  const double bus_gb = static_cast<double>(numel) * 4.0 * (dp - 1) / dp / 1e9;
  auto print_comm = [&](const std::vector<StepTimes>& steps, const char* suffix) {
    std::vector<double> waits;
    for (const StepTimes& step : steps) waits.push_back(step.grad_wait);
    const double grad_wait = median(waits);
    if (!root || dp < 2 || grad_wait <= 0) return;
    const std::string figure = str_cat("ddp_step_comm_", dp, "r", suffix);
    bench::print_figure(figure.c_str(), bus_gb / grad_wait, limit, "GB/s");
    bench::print_figure((figure + "_of_memory_bound").c_str(), bus_gb / grad_wait, memory_bound,
                        "GB/s");
  };
  print_comm(samples[0], "");
  print_comm(samples[2], "_private_buffers");
  if (root) {
    const double comm = serial.grad_wait;  // every reduce-scatter runs inside it
    const double exposed = overlapped.grad_wait;
    std::printf("overlap (reduce-scatter path, slowest rank, median step)\n");
    std::printf("  without overlap: backward %7.2f ms, reduce-scatter %7.2f ms, step %7.2f ms\n",
                1e3 * serial.backward, 1e3 * comm, 1e3 * serial.total());
    std::printf("  with overlap:    backward %7.2f ms, exposed wait   %7.2f ms, step %7.2f ms\n",
                1e3 * overlapped.backward, 1e3 * exposed, 1e3 * overlapped.total());
    std::printf("  hidden fraction of reduce-scatter time: %.3f; step speed-up %.3f\n",
                comm > 0 ? std::max(0.0, 1.0 - exposed / comm) : 0.0,
                serial.total() / overlapped.total());
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options o = parse(argc, argv);
    ProcessGroupPtr world = init_mpi_world();
    const int dp = world->size();
    const bool root = world->rank() == 0;
    const ParamList params = bench_model(o);

    DistributedDataParallelConfig buffered;
    buffered.use_distributed_optimizer = true;
    buffered.overlap_grad_reduce = true;
    buffered.bucket_size = o.bucket;
    const FullParamLayout layout =
        compute_full_param_layout(params, buffered.layout_options(LayoutAlgorithm::kLayerWise, dp));
    std::int64_t numel = 0;
    for (const auto& [key, l] : layout.layouts) numel += l.numel();
    if (root) {
      std::printf(
          "bench_ddp_step: %d ranks, %zu params, %lld buffer elements (bf16 params, fp32 "
          "grads), bucket %lld, %d compute passes, median of %d steps\n",
          dp, params.size(), static_cast<long long>(numel), static_cast<long long>(o.bucket),
          o.passes, o.iters);
    }

    if (o.mode == "all" || o.mode == "compare") {
      run_compare_mode(params, layout, buffered, world, o);
    }
    if (o.mode == "all" || o.mode == "overlap") {
      run_overlap_mode(params, layout, buffered, numel, world, o);
    }
    if (o.mode == "all" || o.mode == "optimizer") run_optimizer_mode(params, world, o);
    return 0;
  } catch (const shardwise::Error& e) {
    std::fprintf(stderr, "bench_ddp_step: %s\n", e.what());
    return 2;
  }
}
