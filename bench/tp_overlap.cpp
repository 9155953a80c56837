// The TP comm-overlap runtime side by side with the non-overlapped path, in one run: the GEMMs
// and TP communication of one transformer layer with sequence parallelism (qkv, proj, fc1, fc2;
// forward and backward, attention and activations left out), timed per step with overlap off
// and with each algorithm, at tp = 2 (ranks 0-1 of the job; the others wait at a barrier) and at
// tp = T (every rank). Then the bytes each rank sent per TP collective against the formula
// (T-1)/T * N * 4 bytes for an all-gather / reduce-scatter of N fp32 elements.
//   scripts/run.sh 4 -- bench_tp_overlap [--hidden 1024] [--tokens 512] [--iters 3]
// Steps of the five plans are interleaved round by round (--iters rounds), best round each.
// Prints, per tp and algorithm:
//   bench: tp_overlap_<algorithm>_tp<T> ours=<s/step> baseline_off=<s/step overlap off> unit=s
//          ratio=<off / ours>   (above 1: the overlap saves time)
// The reference is the same step without overlap, not a machine limit, so the field is named
// baseline_off rather than the limit= of the machine-limit figures.
#include <cstdio>
#include <iterator>
#include <string>
#include <vector>

#include "bench_harness.hpp"
#include "shardwise/comm/mpi_process_group.hpp"
#include "shardwise/core/logging.hpp"
#include "shardwise/tp/overlap_plan.hpp"
#include "shardwise/tp/overlapped_gemm.hpp"

namespace {

using namespace shardwise;
using namespace shardwise::tp;

struct Options {
  std::int64_t hidden = 1024;
  std::int64_t tokens = 512;  // sequence x micro-batch, the gathered row count
  int iters = 3;
};

std::vector<float> filled(std::int64_t n, float value) {
  return std::vector<float>(static_cast<std::size_t>(n), value);
}

// One layer's TP GEMMs on rank `rank` of a TP group of size t (weights and activations filled
// with small constants: the timing does not depend on the values).
struct Layer {
  std::int64_t h, m, t;
  std::vector<float> x, w_qkv, w_proj, w_fc1, w_fc2, qkv, attn, y, fc1, act, out;
  std::vector<float> d_out, d_act, d_attn, d_x, dw_qkv, dw_proj, dw_fc1, dw_fc2, d_mid, d_in;

  Layer(std::int64_t hidden, std::int64_t tokens, std::int64_t tp)
      : h(hidden), m(tokens / tp), t(tp) {
    const std::int64_t rows = t * m, hl = h / t, fl = 4 * h / t;
    x = filled(m * h, 0.01f);
    w_qkv = filled(3 * hl * h, 0.01f), dw_qkv = w_qkv;
    w_proj = filled(h * hl, 0.01f), dw_proj = w_proj;
    w_fc1 = filled(fl * h, 0.01f), dw_fc1 = w_fc1;
    w_fc2 = filled(h * fl, 0.01f), dw_fc2 = w_fc2;
    qkv = filled(rows * 3 * hl, 0), attn = filled(rows * hl, 0.01f), y = filled(m * h, 0);
    fc1 = filled(rows * fl, 0), act = filled(rows * fl, 0.01f), out = filled(m * h, 0);
    d_out = filled(m * h, 0.01f), d_act = filled(rows * fl, 0), d_mid = filled(m * h, 0);
    d_attn = filled(rows * hl, 0), d_in = filled(rows * 3 * hl, 0.01f), d_x = filled(m * h, 0);
  }

  void step(ProcessGroup& g, const TpOverlapPlan& plan) {
    const std::int64_t rows = t * m, hl = h / t, fl = 4 * h / t;
    auto c = [&](GemmSlot s) { return plan.choice(s); };
    const auto T = blas::Op::kTranspose;
    all_gather_gemm(g, c(GemmSlot::kQkvFprop), {x.data(), m, h}, {{w_qkv.data(), 3 * hl, h}, T},
                    {qkv.data(), rows, 3 * hl});
    gemm_reduce_scatter(g, c(GemmSlot::kProjFprop), {attn.data(), rows, hl},
                        {{w_proj.data(), h, hl}, T}, {y.data(), m, h});
    all_gather_gemm(g, c(GemmSlot::kFc1Fprop), {y.data(), m, h}, {{w_fc1.data(), fl, h}, T},
                    {fc1.data(), rows, fl});
    gemm_reduce_scatter(g, c(GemmSlot::kFc2Fprop), {act.data(), rows, fl},
                        {{w_fc2.data(), h, fl}, T}, {out.data(), m, h});
    row_parallel_backward(g, c(GemmSlot::kFc2Dgrad), {act.data(), rows, fl}, {w_fc2.data(), h, fl},
                          {d_out.data(), m, h}, {d_act.data(), rows, fl}, {dw_fc2.data(), h, fl});
    column_parallel_backward(g, c(GemmSlot::kFc1Dgrad), c(GemmSlot::kFc1Wgrad), {y.data(), m, h},
                             {w_fc1.data(), fl, h}, {d_act.data(), rows, fl},
                             {{d_mid.data(), m, h}, {dw_fc1.data(), fl, h}, 0.0f});
    row_parallel_backward(g, c(GemmSlot::kProjDgrad), {attn.data(), rows, hl},
                          {w_proj.data(), h, hl}, {d_mid.data(), m, h}, {d_attn.data(), rows, hl},
                          {dw_proj.data(), h, hl});
    column_parallel_backward(g, c(GemmSlot::kQkvDgrad), c(GemmSlot::kQkvWgrad), {x.data(), m, h},
                             {w_qkv.data(), 3 * hl, h}, {d_in.data(), rows, 3 * hl},
                             {{d_x.data(), m, h}, {dw_qkv.data(), 3 * hl, h}, 0.0f});
  }
};

// Every applicable slot on `algorithm` (pipeline: 4 splits), the rest none.
TpOverlapPlan uniform_plan(OverlapAlgorithm algorithm) {
  TransformerLayerTPOverlapCfg cfg;
  for (const auto& [name, member] : TransformerLayerTPOverlapCfg::slots()) {
    if (algorithm == OverlapAlgorithm::kBulk) {
      cfg.*member = BulkOverlapCfg{1, 1, false, "bulk"};
    } else if (algorithm == OverlapAlgorithm::kPipeline) {
      cfg.*member = PipelineOverlapCfg{1, 1, 4, false, false, false, "pipeline"};
    } else if (algorithm == OverlapAlgorithm::kRingExchange) {
      cfg.*member = RingExchangeOverlapCfg{};
    }
  }
  return algorithm == OverlapAlgorithm::kNone ? tp_overlap_plan(CommOverlapResolution{})
                                              : tp_overlap_plan(cfg);
}

// One step of `plan`, timed on every rank of the group; the slowest rank sets the step time.
double step_seconds(ProcessGroup& g, Layer& layer, const TpOverlapPlan& plan) {
  g.barrier()->wait();
  std::vector<float> seconds = {
      static_cast<float>(bench::seconds_of([&] { layer.step(g, plan); }))};
  g.all_reduce({seconds.data(), 1, DType::kFloat32}, ReduceOp::kMax)->wait();
  return seconds[0];
}

// Rounds of one step per plan, interleaved so that load from other processes hits every plan
// alike; the fastest round of each plan is its figure.
void time_algorithms(ProcessGroup& g, const Options& o) {
  const int t = g.size();
  Layer layer(o.hidden, o.tokens, t);
  const std::pair<const char*, TpOverlapPlan> plans[] = {
      {"off", uniform_plan(OverlapAlgorithm::kNone)},
      {"ring_exchange", uniform_plan(OverlapAlgorithm::kRingExchange)},
      {"pipeline", uniform_plan(OverlapAlgorithm::kPipeline)},
      {"bulk", uniform_plan(OverlapAlgorithm::kBulk)},
      {"default_mix", tp_overlap_plan(default_tp_overlap_cfg())},
  };
  std::vector<std::vector<double>> times(std::size(plans));
  for (const auto& entry : plans) layer.step(g, entry.second);  // warm-up: buffers, connections
  for (int round = 0; round < o.iters; ++round) {
    for (std::size_t p = 0; p < std::size(plans); ++p) {
      times[p].push_back(step_seconds(g, layer, plans[p].second));
    }
  }
  const double off = bench::best(times[0]);
  const double flops =
      6.0 * static_cast<double>(o.tokens) * 12.0 * static_cast<double>(o.hidden * o.hidden) / t;
  if (g.rank() != 0) return;
  std::printf("tp=%d hidden=%lld tokens=%lld: overlap off %.4f s/step (%.1f GF/s per rank)\n", t,
              static_cast<long long>(o.hidden), static_cast<long long>(o.tokens), off,
              flops / off * 1e-9);
  for (std::size_t p = 1; p < std::size(plans); ++p) {
    const double ours = bench::best(times[p]);
    std::printf("bench: tp_overlap_%s_tp%d ours=%.4f baseline_off=%.4f unit=s ratio=%.3f\n",
                plans[p].first, t, ours, off, off / ours);
  }
}

// Bytes this rank sent for one all-gather and one reduce-scatter of the layer's activation
// ([tokens, hidden] gathered), each algorithm, against (T-1)/T * N * 4.
void report_bytes(ProcessGroup& g, const Options& o) {
  const int t = g.size();
  Layer layer(o.hidden, o.tokens, t);
  const std::int64_t n = t * layer.m * o.hidden;
  const double formula = static_cast<double>(t - 1) / t * static_cast<double>(n) * 4.0;
  const std::int64_t hl = o.hidden / t;
  for (auto algorithm :
       {OverlapAlgorithm::kNone, OverlapAlgorithm::kRingExchange, OverlapAlgorithm::kPipeline}) {
    const OverlapChoice choice{algorithm, 4};
    g.barrier()->wait();
    g.reset_traffic();
    std::vector<float> out(static_cast<std::size_t>(t * layer.m * hl));
    all_gather_gemm(g, choice, {layer.x.data(), layer.m, o.hidden},
                    {{layer.w_proj.data(), o.hidden, hl}, blas::Op::kNone},
                    {out.data(), t * layer.m, hl});
    const double gather = static_cast<double>(g.traffic().total_sent());
    g.barrier()->wait();
    g.reset_traffic();
    gemm_reduce_scatter(g, choice, {layer.attn.data(), t * layer.m, hl},
                        {{layer.w_proj.data(), o.hidden, hl}, blas::Op::kTranspose},
                        {layer.y.data(), layer.m, o.hidden});
    const double scatter = static_cast<double>(g.traffic().total_sent());
    if (g.rank() == 0) {
      std::printf(
          "bytes tp=%d %-13s all-gather %.0f (formula %.0f, ratio %.3f)  reduce-scatter "
          "%.0f (formula %.0f, ratio %.3f)\n",
          t, std::string(overlap_algorithm_name(algorithm)).c_str(), gather, formula,
          gather / formula, scatter, formula, scatter / formula);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  return run_rank_main([&] {
    Options o;
    bench::parse_bench_options(
        "bench_tp_overlap", argc, argv,
        {{"--hidden", &o.hidden}, {"--tokens", &o.tokens}, {"--iters", &o.iters}});
    auto world = init_mpi_world();
    log::set_level(log::Level::kWarning);
    const int world_size = world->size();
    SW_REQUIRE(o.hidden % (4 * world_size) == 0 && o.tokens % (4 * world_size) == 0,
               InvalidArgument, "bench_tp_overlap: --hidden and --tokens must be multiples of 4 x ",
               world_size, " ranks");
    if (world->rank() == 0) {
      std::printf("bench_tp_overlap: %d ranks, hidden %lld, tokens %lld, best of %d steps\n",
                  world_size, static_cast<long long>(o.hidden), static_cast<long long>(o.tokens),
                  o.iters);
    }
    if (world_size > 2) {
      // tp = 2 on ranks 0 and 1 alone, so it gets the machine's cores as a tp = 2 job would.
      auto pair = split_group(world, world->rank() < 2 ? 0 : -1, world->rank(), "tp2");
      if (pair) {
        time_algorithms(*pair, o);
        report_bytes(*pair, o);
      }
      world->barrier()->wait();
    }
    time_algorithms(*world, o);
    report_bytes(*world, o);
    return 0;
  });
}
