// Quality of the layer-wise layout on every bundled model: every invariant holds and padding is
// never worse than the LPT + padding-floor baseline (baseline_layouts.hpp).
#include <gtest/gtest.h>

#include <algorithm>

#include "shardwise/layout/baseline_layouts.hpp"
#include "shardwise/layout/buffer_grouping.hpp"
#include "shardwise/layout/layout_algorithms.hpp"
#include "shardwise/layout/layout_stats.hpp"
#include "shardwise/layout/model_zoo.hpp"
#include "shardwise/layout/param_info.hpp"

namespace shardwise {
namespace {

constexpr double kPaddingEpsilon = 1e-9;

LayoutOptions layer_wise_options(int dp) {
  LayoutOptions options;
  options.algorithm = LayoutAlgorithm::kLayerWise;
  options.data_parallel_size = dp;
  options.bucket_size = default_bucket_size(dp);
  return options;
}

// The Newton-Schulz balance of a layout with dp shards per buffer, recomputed here by plain
// loops: rank s works on shard s of every buffer - whole matrices (their full Newton-Schulz cost)
// in shard-aligned buffers, elementwise work on the real elements of its 1/dp slice of each bucket
// elsewhere. The reported max/mean must match, and it cannot be below the floor any whole-matrix
// ownership has: the busiest rank does at least the mean and at least the largest matrix.
void expect_newton_schulz_balance(const ParamList& params, const FullParamLayout& layout, int dp,
                                  const LayoutStats& stats) {
  std::vector<double> load(static_cast<std::size_t>(dp), 0.0);
  double largest = 0.0;
  for (const auto& [key, buffer] : layout.layouts) {
    ASSERT_EQ(buffer.num_shards, dp) << key.to_string();
    for (const ParamRange& range : buffer.param_index_map) {
      if (range.numel() == 0) continue;
      const BucketRange& bucket = buffer.bucket_indices.at(static_cast<std::size_t>(range.bucket));
      if (buffer.shard_aligned) {
        const std::int64_t owner = (range.start - bucket.start) / (bucket.numel() / dp);
        const double cost = newton_schulz_cost(params[range.param]);
        load.at(static_cast<std::size_t>(owner)) += cost;
        largest = std::max(largest, cost);
        continue;
      }
      for (int s = 0; s < dp; ++s) {
        const std::int64_t lo = std::max(range.start, bucket.start + bucket.numel() * s / dp);
        const std::int64_t hi = std::min(range.end, bucket.start + bucket.numel() * (s + 1) / dp);
        if (hi > lo) load[static_cast<std::size_t>(s)] += static_cast<double>(hi - lo);
      }
    }
  }
  double total = 0.0;
  for (double l : load) total += l;
  ASSERT_GT(total, 0.0);
  const double mean = total / dp;
  const double expected = *std::max_element(load.begin(), load.end()) / mean;
  EXPECT_NEAR(stats.ns_cost_max_over_mean, expected, 1e-9 * expected);
  EXPECT_GE(stats.ns_cost_max_over_mean, std::max(1.0, largest / mean) * (1 - 1e-9))
      << "largest matrix " << largest / mean << " x mean";
}

class ZooQuality : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(ZooQuality, LayerWiseNoWorseThanLptFloorAndValid) {
  const auto& [name, dp] = GetParam();
  const ParamList params = bundled_model_spec(name).params;
  const LayoutOptions options = layer_wise_options(dp);

  const FullParamLayout ours = compute_full_param_layout(params, options);
  ASSERT_NO_THROW(validate_full_layout(params, ours, options));

  // Baseline: the same buffers, shard-aligned ones laid out by the LPT-floor baseline.
  FullParamLayout baseline = ours;
  std::int64_t floor_padded = 0;  // lower bound on the padded size of any shard-aligned layout
  for (const auto& [key, group] : group_params_for_buffers(params, options)) {
    const PerBufferParamLayout& our_buffer = ours.layouts.at(key);
    if (!key.is_layer_wise) {
      floor_padded += our_buffer.numel();
      continue;
    }
    ASSERT_TRUE(our_buffer.shard_aligned) << key.to_string();
    BufferLayoutInput input;
    input.params = &params;
    input.buffer_params = group.params;
    input.param_indices = group.param_indices;
    input.bucket_size = options.bucket_size;
    input.data_parallel_size = key.is_expert_parallel ? options.expert_dp() : dp;
    baseline.layouts[key] = compute_lpt_floor_layer_wise_layout(input);
    // (validate_layout is not applied to the baseline: it also checks properties specific to our
    // algorithm, such as "no bucket opens with a param that fits the previous bucket's padding".)

    // Shards hold at least ceil(T/dp) elements, and the bucket holding the largest param has
    // shards of at least its size (the padding floor of docs/design.md).
    std::int64_t total = 0;
    std::int64_t largest = 0;
    for (const ParamId id : group.params) {
      total += params[id].numel();
      largest = std::max(largest, params[id].numel());
    }
    const std::int64_t n = input.data_parallel_size;
    floor_padded += std::max(total, n * largest);
    // Every param of the buffer is placed exactly once.
    EXPECT_EQ(our_buffer.param_index_map.size(), group.params.size());
  }

  const LayoutStats our_stats = compute_layout_stats(params, ours, options);
  const LayoutStats baseline_stats = compute_layout_stats(params, baseline, options);
  EXPECT_EQ(our_stats.numel_unpadded, baseline_stats.numel_unpadded);
  EXPECT_LE(our_stats.padding_fraction, baseline_stats.padding_fraction + kPaddingEpsilon)
      << name << " dp " << dp << ": ours " << our_stats.padding_fraction << " lpt-floor "
      << baseline_stats.padding_fraction;
  EXPECT_GE(our_stats.numel_padded, floor_padded);
  expect_newton_schulz_balance(params, ours, dp, our_stats);
  RecordProperty("padding_ours", std::to_string(our_stats.padding_fraction));
  RecordProperty("padding_lpt_floor", std::to_string(baseline_stats.padding_fraction));
}

INSTANTIATE_TEST_SUITE_P(BundledModels, ZooQuality,
                         ::testing::Combine(::testing::ValuesIn(bundled_model_names()),
                                            ::testing::Values(8, 64)),
                         [](const auto& info) {
                           std::string name = std::get<0>(info.param);
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name + "_dp" + std::to_string(std::get<1>(info.param));
                         });

}  // namespace
}  // namespace shardwise
