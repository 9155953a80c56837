// Layout quality: padding and Newton–Schulz balance of our layer-wise layout (plain cuts, so the
// packing alone is compared) next to two baselines, for every bundled model at dp 8, 64 and 256,
// plus layout time.
//
//   lpt      - straightforward baseline written here: backprop-order chunks of >= bucket_size
//              elements, each packed largest-numel-first onto the least-loaded shard, every shard
//              padded to the largest one.
//   lpt-floor - LPT plus the padding floor: a chunk closes once it holds
//              max(bucket_size, int(dp x largest x 0.9)) elements (Megatron-LM's current rule,
//              re-implemented in baseline_layouts.hpp; see the README for how its figures compare).
//
// Only the shard-aligned buffers differ between the three; the rest (DistributedOptimizer
// layout of non-Muon params) is shared, so the columns compare the layer-wise algorithms.
// Two bucket sizes: Megatron's default with overlapped grad reduce, max(40M, 1M * dp), where
// large matrices each fill a bucket alone, and 1G elements, where buckets hold many params.
// A last table sets one shard group (S = dp) against the shard group size `auto` picks
// (shard_group_choice.hpp) at dp 64, 256 and 1024: padding, per-rank param + grad buffer and
// optimizer-state bytes, and per-rank comm bytes per step (layout_cost.hpp). Another sets the
// plain cut search against overlap-aware cuts (LayoutOptions::overlap_aware_cuts) at dp 8, 64
// and 256: padding and exposed (last-bucket) reduce-scatter bytes of the layer-wise buffers.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <limits>
#include <numeric>
#include <string>

#include "bench_harness.hpp"
#include "lpt_baseline.hpp"
#include "shardwise/layout/baseline_layouts.hpp"
#include "shardwise/layout/buffer_grouping.hpp"
#include "shardwise/layout/layout_algorithms.hpp"
#include "shardwise/layout/layout_cost.hpp"
#include "shardwise/layout/layout_stats.hpp"
#include "shardwise/layout/model_zoo.hpp"
#include "shardwise/layout/padding.hpp"
#include "shardwise/layout/shard_group_choice.hpp"

namespace shardwise {
namespace {

using bench::lpt_layout;
using bench::with_layer_wise_buffers;

using bench::Clock;
using bench::seconds_since;

// Best of `repeats` runs (at least one; stops repeating once a run takes over 0.5 s).
template <typename Fn>
double time_best(int repeats, Fn&& fn) {
  double best = 1e300;
  for (int i = 0; i < repeats; ++i) {
    const auto start = Clock::now();
    fn();
    best = std::min(best, seconds_since(start));
    if (best > 0.5) break;
  }
  return best;
}

std::string percent(double fraction) {
  char text[32];
  std::snprintf(text, sizeof text, "%7.3f%%", 100.0 * fraction);
  return text;
}

// Lower bound on the padded size of any shard-aligned layout of the layer-wise buffers (a buffer
// of total T whose largest param is M needs dp * max(T/dp, M)), plus the other buffers as laid
// out; returned as a padding fraction (the padding floor of docs/design.md).
double padding_floor(const ParamList& params, const LayoutOptions& options,
                     const FullParamLayout& ours) {
  std::int64_t padded = 0;
  std::int64_t unpadded = 0;
  for (const auto& [key, group] : group_params_for_buffers(params, options)) {
    std::int64_t total = 0;
    std::int64_t largest = 0;
    for (const ParamId id : group.params) {
      total += params[id].numel();
      largest = std::max(largest, params[id].numel());
    }
    const std::int64_t dp =
        key.is_expert_parallel ? options.expert_dp() : options.data_parallel_size;
    padded += key.is_layer_wise ? std::max(total, dp * largest) : ours.layouts.at(key).numel();
    unpadded += total;
  }
  return padded > 0 ? 1.0 - static_cast<double>(unpadded) / static_cast<double>(padded) : 0.0;
}

void quality_table(const char* title, const std::function<std::int64_t(int)>& bucket_size) {
  std::printf("\n%s\n", title);
  std::printf("%-13s %5s | %9s %9s %9s %9s | %8s %8s %8s | %8s %8s\n", "model", "dp", "pad floor",
              "pad ours", "pad lpt", "pad lptfl", "ns ours", "ns lpt", "ns lptfl", "ours ms",
              "lptfl ms");
  for (const auto& name : bundled_model_names()) {
    const ModelSpec spec = bundled_model_spec(name);
    for (const int dp : {8, 64, 256}) {
      LayoutOptions options;
      options.algorithm = LayoutAlgorithm::kLayerWise;
      options.data_parallel_size = dp;
      options.bucket_size = bucket_size(dp);
      options.overlap_aware_cuts = false;  // the packing alone (overlap_table has the default)

      FullParamLayout ours;
      const double ours_s =
          time_best(3, [&] { ours = compute_full_param_layout(spec.params, options); });
      validate_full_layout(spec.params, ours, options);
      FullParamLayout lpt_floor;
      const double lpt_floor_s = time_best(3, [&] {
        lpt_floor = with_layer_wise_buffers(spec.params, options, ours,
                                            compute_lpt_floor_layer_wise_layout);
      });
      const FullParamLayout lpt = with_layer_wise_buffers(spec.params, options, ours, lpt_layout);

      const LayoutStats s_ours = compute_layout_stats(spec.params, ours, options);
      const LayoutStats s_lpt = compute_layout_stats(spec.params, lpt, options);
      const LayoutStats s_meg = compute_layout_stats(spec.params, lpt_floor, options);
      std::printf("%-13s %5d | %9s %9s %9s %9s | %8.4f %8.4f %8.4f | %8.1f %8.1f\n", name.c_str(),
                  dp, percent(padding_floor(spec.params, options, ours)).c_str(),
                  percent(s_ours.padding_fraction).c_str(), percent(s_lpt.padding_fraction).c_str(),
                  percent(s_meg.padding_fraction).c_str(), s_ours.ns_cost_max_over_mean,
                  s_lpt.ns_cost_max_over_mean, s_meg.ns_cost_max_over_mean, 1e3 * ours_s,
                  1e3 * lpt_floor_s);
      std::fflush(stdout);
    }
  }
}

// S = dp against S = auto; GiB per rank. "mem x" = memory with S = dp / memory with auto.
void shard_group_table() {
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  std::printf(
      "\nlayer-wise shard groups, bucket size max(40M, 1M*dp): S = dp vs S = auto; per rank: "
      "buf = param + grad buffers, opt = optimizer state, comm = bytes per step, exp = exposed "
      "(last-bucket) reduce-scatter bytes per step (GiB)\n");
  std::printf("%-13s %5s | %9s %9s %8s %9s %8s | %5s %9s %9s %8s %9s %8s | %6s %6s\n", "model",
              "dp", "pad S=dp", "buf", "opt", "comm", "exp", "auto", "pad auto", "buf", "opt",
              "comm", "exp", "mem x", "exp x");
  for (const auto& name : bundled_model_names()) {
    const ModelSpec spec = bundled_model_spec(name);
    for (const int dp : {64, 256, 1024}) {
      LayoutOptions options;
      options.algorithm = LayoutAlgorithm::kLayerWise;
      options.data_parallel_size = dp;
      options.bucket_size = default_bucket_size(dp);
      const ShardGroupChoice choice = choose_shard_group_size(spec.params, options);
      const ShardGroupCandidate& full = choice.table.back();
      const ShardGroupCandidate& chosen = *std::find_if(
          choice.table.begin(), choice.table.end(), [&](const ShardGroupCandidate& c) {
            return c.shard_group_size == choice.shard_group_size;
          });
      std::printf(
          "%-13s %5d | %9s %9.2f %8.2f %9.2f %8.2f | %5d %9s %9.2f %8.2f %9.2f %8.2f | %6.2f "
          "%6.2f\n",
          name.c_str(), dp, percent(full.padding_fraction).c_str(), full.param_grad_bytes / kGiB,
          full.optimizer_state_bytes / kGiB, full.comm_bytes / kGiB, full.exposed_rs_bytes / kGiB,
          chosen.shard_group_size, percent(chosen.padding_fraction).c_str(),
          chosen.param_grad_bytes / kGiB, chosen.optimizer_state_bytes / kGiB,
          chosen.comm_bytes / kGiB, chosen.exposed_rs_bytes / kGiB,
          static_cast<double>(full.memory_bytes()) / static_cast<double>(chosen.memory_bytes()),
          chosen.exposed_rs_bytes > 0 ? static_cast<double>(full.exposed_rs_bytes) /
                                            static_cast<double>(chosen.exposed_rs_bytes)
                                      : 1.0);
      std::fflush(stdout);
    }
  }
}

// Layer-wise buffers only: buckets, padding fraction and exposed reduce-scatter bytes per rank.
struct LayerWiseFigures {
  std::size_t buckets = 0;
  double padding = 0.0;
  double exposed_gb = 0.0;
};

LayerWiseFigures layer_wise_figures(const ParamList& params, const LayoutOptions& options) {
  const FullParamLayout layout = compute_full_param_layout(params, options);
  BufferCost total;
  LayerWiseFigures out;
  for (const auto& [key, cost] : compute_layout_cost(layout, options).buffers) {
    if (!key.is_layer_wise) continue;
    total += cost;
    out.buckets += layout.layouts.at(key).bucket_indices.size();
  }
  out.padding = total.numel_padded > 0 ? static_cast<double>(total.padding_numel()) /
                                             static_cast<double>(total.numel_padded)
                                       : 0.0;
  out.exposed_gb = static_cast<double>(total.exposed_rs_bytes) / 1e9;
  return out;
}

void overlap_table() {
  std::printf(
      "\noverlap-aware cuts, bucket size max(40M, 1M*dp), layer-wise buffers: buckets, padding, "
      "exposed last-bucket reduce-scatter GB per rank\n");
  std::printf("%-13s %5s | %7s %9s %10s | %7s %9s %10s | %8s\n", "model", "dp", "buckets",
              "padding", "exposed", "buckets", "padding", "exposed", "exposed x");
  for (const auto& name : bundled_model_names()) {
    const ModelSpec spec = bundled_model_spec(name);
    for (const int dp : {8, 64, 256}) {
      LayoutOptions options;
      options.data_parallel_size = dp;
      options.bucket_size = default_bucket_size(dp);
      options.overlap_aware_cuts = false;
      const LayerWiseFigures plain = layer_wise_figures(spec.params, options);
      options.overlap_aware_cuts = true;
      const LayerWiseFigures aware = layer_wise_figures(spec.params, options);
      std::printf("%-13s %5d | %7zu %9s %10.3f | %7zu %9s %10.3f | %8.2f\n", name.c_str(), dp,
                  plain.buckets, percent(plain.padding).c_str(), plain.exposed_gb, aware.buckets,
                  percent(aware.padding).c_str(), aware.exposed_gb,
                  aware.exposed_gb > 0 ? plain.exposed_gb / aware.exposed_gb : 1.0);
      std::fflush(stdout);
    }
  }
}

int run() {
  std::printf(
      "Layer-wise layout quality: padding fraction (and its floor) and Newton-Schulz max/mean "
      "cost per rank.\nours = compute_full_param_layout, lpt = LPT-by-numel baseline, lptfl = "
      "compute_lpt_floor_layer_wise_layout (LPT + padding floor); times are best of up to 3 "
      "runs.\n");
  quality_table("bucket size max(40M, 1M*dp) (Megatron's default with overlapped grad reduce)",
                [](int dp) { return default_bucket_size(dp); });
  quality_table("bucket size 1G elements (buckets hold many params, so packing decides)",
                [](int) { return std::int64_t{1'000'000'000}; });
  shard_group_table();
  overlap_table();

  // Layout time at scale: DeepSeek-V3-sized spec at dp 1024 (expert dp 1024 too) and at dp 8
  // (where overlap-aware cuts re-plan the most), default options, target < 1 s.
  const ModelSpec deepseek = bundled_model_spec("deepseek-v3");
  LayoutOptions options;
  options.data_parallel_size = 1024;
  options.bucket_size = default_bucket_size(1024);
  FullParamLayout layout;
  const double seconds =
      time_best(3, [&] { layout = compute_full_param_layout(deepseek.params, options); });
  const LayoutStats stats = compute_layout_stats(deepseek.params, layout, options);
  std::printf(
      "\ndeepseek-v3 (%zu params) at dp 1024: layout %.3f s, target 1 s, time/target %.3f; "
      "padding %s, ns max/mean %.4f\n",
      deepseek.params.size(), seconds, seconds / 1.0, percent(stats.padding_fraction).c_str(),
      stats.ns_cost_max_over_mean);
  for (const bool aware : {false, true}) {
    options.data_parallel_size = 8;
    options.bucket_size = default_bucket_size(8);
    options.overlap_aware_cuts = aware;
    const double dp8 =
        time_best(3, [&] { layout = compute_full_param_layout(deepseek.params, options); });
    std::printf("deepseek-v3 at dp 8, %s cuts: layout %.3f s, target 1 s, time/target %.3f\n",
                aware ? "overlap-aware" : "plain", dp8, dp8 / 1.0);
  }
  return 0;
}

}  // namespace
}  // namespace shardwise

int main() { return shardwise::run(); }
