// Muon step balance at dp=4: a Muon step of the layer-wise optimizer takes as long as the slowest
// rank's Newton–Schulz work. For a llama-like spec (scaled so that every matrix really runs through
// Newton–Schulz on this CPU), this measures the NS time of every managed matrix and adds it up per
// owning rank, under our layer-wise layout and under the LPT-by-numel baseline (bench/
// lpt_baseline.hpp), and prints per-rank seconds, max/mean and the step-time ratio.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <numeric>
#include <vector>

#include "bench_harness.hpp"
#include "lpt_baseline.hpp"
#include "shardwise/core/blas.hpp"
#include "shardwise/layout/layout_algorithms.hpp"
#include "shardwise/layout/model_zoo.hpp"
#include "shardwise/optim/newton_schulz.hpp"

namespace shardwise {
namespace {

using bench::Clock;
using bench::seconds_since;

TransformerConfig llama_like() {
  TransformerConfig c;
  c.name = "llama-like-small";
  c.num_layers = 6;
  c.hidden_size = 512;
  c.ffn_hidden_size = 1376;
  c.num_attention_heads = 8;
  c.num_query_groups = 2;
  c.vocab_size = 8192;
  c.gated_mlp = true;
  c.dtype = DType::kFloat32;
  return c;
}

// Seconds of one Newton–Schulz orthogonalization per distinct shape (median of 3 runs).
std::map<std::pair<std::int64_t, std::int64_t>, double> time_shapes(const ParamList& params) {
  std::map<std::pair<std::int64_t, std::int64_t>, double> seconds;
  optim::NewtonSchulz ns;
  for (const ParamInfo& p : params) {
    if (!is_managed_by_layer_wise_optimizer(p)) continue;
    const auto shape = std::make_pair(p.shape[0], p.shape[1]);
    if (seconds.count(shape)) continue;
    std::vector<float> g(static_cast<std::size_t>(p.numel()));
    for (std::size_t i = 0; i < g.size(); ++i) g[i] = static_cast<float>((i * 7919 % 1000) - 500);
    std::vector<double> runs;
    for (int r = 0; r < 3; ++r) {
      const auto t0 = Clock::now();
      ns.orthogonalize(g.data(), shape.first, shape.second, g.data());
      runs.push_back(seconds_since(t0));
    }
    std::sort(runs.begin(), runs.end());
    seconds[shape] = runs[1];
  }
  return seconds;
}

struct Balance {
  std::vector<double> rank_seconds;
  double max() const { return *std::max_element(rank_seconds.begin(), rank_seconds.end()); }
  double mean() const {
    return std::accumulate(rank_seconds.begin(), rank_seconds.end(), 0.0) / rank_seconds.size();
  }
};

Balance muon_balance(const ParamList& params, const FullParamLayout& layout, int dp,
                     const std::map<std::pair<std::int64_t, std::int64_t>, double>& seconds) {
  Balance b;
  b.rank_seconds.assign(static_cast<std::size_t>(dp), 0.0);
  for (const auto& [key, buffer] : layout.layouts) {
    if (!key.is_layer_wise) continue;
    for (const ParamRange& range : buffer.param_index_map) {
      const ParamInfo& p = params[range.param];
      if (!is_managed_by_layer_wise_optimizer(p)) continue;
      b.rank_seconds[static_cast<std::size_t>(buffer.owner_shard(range))] +=
          seconds.at({p.shape[0], p.shape[1]});
    }
  }
  return b;
}

}  // namespace
}  // namespace shardwise

int main() {
  using namespace shardwise;
  blas::set_num_threads(1);
  const int dp = 4;
  const ParamList params = generate_transformer_params(llama_like());
  const auto seconds = time_shapes(params);

  std::printf("Muon step balance, %s at dp=%d (Newton-Schulz seconds per rank, 1 BLAS thread)\n",
              llama_like().name.c_str(), dp);
  std::printf("%-22s %-12s %-40s %8s %10s\n", "layout", "bucket size", "per-rank NS seconds",
              "max/mean", "step (s)");
  for (std::int64_t bucket : {std::int64_t{4'000'000}, std::int64_t{40'000'000}}) {
    LayoutOptions options;
    options.algorithm = LayoutAlgorithm::kLayerWise;
    options.data_parallel_size = dp;
    options.bucket_size = bucket;
    const FullParamLayout ours = compute_full_param_layout(params, options);
    const FullParamLayout lpt =
        bench::with_layer_wise_buffers(params, options, ours, bench::lpt_layout);
    double step_ours = 0, step_lpt = 0;
    for (const auto& [name, layout] :
         {std::pair{"ours (layer-wise)", &ours}, std::pair{"LPT by numel", &lpt}}) {
      const Balance b = muon_balance(params, *layout, dp, seconds);
      std::string ranks;
      for (double s : b.rank_seconds) {
        char cell[16];
        std::snprintf(cell, sizeof cell, "%7.3f ", s);
        ranks += cell;
      }
      std::printf("%-22s %-12lld %-40s %8.3f %10.3f\n", name, static_cast<long long>(bucket),
                  ranks.c_str(), b.max() / b.mean(), b.max());
      (layout == &ours ? step_ours : step_lpt) = b.max();
    }
    std::printf("  Muon step time ours / LPT = %.3f\n", step_ours / step_lpt);
  }
  return 0;
}
