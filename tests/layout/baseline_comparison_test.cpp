// Our layer-wise layout against the LPT + padding-floor baseline (Megatron-LM's rule, see
// baseline_layouts.hpp) on GPT-like models: never more padding, and on these models less. Prints
// the padding fractions side by side.
#include <gtest/gtest.h>

#include <cstdio>

#include "layout/layout_test_models.hpp"
#include "sanitizer_budget.hpp"
#include "shardwise/layout/baseline_layouts.hpp"
#include "shardwise/layout/buffer_grouping.hpp"
#include "shardwise/layout/layout_algorithms.hpp"

namespace shardwise {
namespace {

using layout_test::GptShape;

double max_over_mean_ns(const ParamList& params, const PerBufferParamLayout& layout) {
  std::vector<double> cost(static_cast<std::size_t>(layout.num_shards), 0.0);
  double total = 0;
  for (const auto& r : layout.param_index_map) {
    const double c = newton_schulz_cost(params[r.param]);
    cost[static_cast<std::size_t>(layout.owner_shard(r))] += c;
    total += c;
  }
  return *std::max_element(cost.begin(), cost.end()) / (total / layout.num_shards);
}

TEST(BaselineComparison, GptLikeModelsNeverMorePaddingThanLptFloor) {
  SW_SKIP_UNDER_SANITIZERS();
  int strictly_better = 0, cases = 0;
  double sum_ours = 0, sum_baseline = 0, sum_floor = 0;
  std::printf("%-34s %5s %9s %9s %9s %8s %8s\n", "model", "dp", "ours", "lpt-floor", "floor",
              "ns-ours", "ns-meg");
  for (int layers : {12, 24, 48, 96}) {
    for (std::int64_t hidden : {1024, 2048, 4096}) {
      for (bool modern : {false, true}) {
        GptShape shape;
        shape.layers = layers;
        shape.hidden = hidden;
        shape.vocab = 50304;
        if (modern) {  // GQA (8 KV heads of 128) + SwiGLU with an 8/3 x h FFN
          shape.kv_heads_dim = 1024;
          shape.swiglu = true;
          shape.ffn = (hidden * 8 / 3 + 255) / 256 * 256;
        } else {
          shape.ffn = 4 * hidden;
          shape.biases = true;
        }
        const ParamList params = layout_test::gpt_model(shape);
        for (int dp : {8, 64, 256}) {
          LayoutOptions options;
          options.data_parallel_size = dp;
          options.bucket_size = default_bucket_size(dp);
          const FullParamLayout ours = compute_full_param_layout(params, options);
          for (const auto& [key, group] : group_params_for_buffers(params, options)) {
            if (!key.is_layer_wise) continue;
            BufferLayoutInput input;
            input.params = &params;
            input.buffer_params = group.params;
            input.param_indices = group.param_indices;
            input.bucket_size = options.bucket_size;
            input.data_parallel_size = dp;
            const auto baseline = compute_lpt_floor_layer_wise_layout(input);
            const auto& mine = ours.layouts.at(key);
            const auto pad_ours = layout_test::padding_elements(params, mine);
            const auto pad_base = layout_test::padding_elements(params, baseline);
            EXPECT_LE(pad_ours, pad_base) << layers << "L h" << hidden << " dp " << dp;
            strictly_better += pad_ours < pad_base;
            ++cases;
            std::int64_t total = 0, largest = 0;
            for (ParamId id : group.params) {
              total += params[id].numel();
              largest = std::max(largest, params[id].numel());
            }
            const double floor =
                1.0 - static_cast<double>(total) /
                          (static_cast<double>(dp) * std::max((total + dp - 1) / dp, largest));
            const double f_ours = static_cast<double>(pad_ours) / mine.numel();
            const double f_meg = static_cast<double>(pad_base) / baseline.numel();
            EXPECT_GE(f_ours, floor - 1e-12);
            sum_ours += f_ours, sum_baseline += f_meg, sum_floor += floor;
            char name[64];
            std::snprintf(name, sizeof name, "%dL h%lld %s", layers, static_cast<long long>(hidden),
                          modern ? "gqa+swiglu" : "mha+gelu");
            std::printf("%-34s %5d %9.5f %9.5f %9.5f %8.4f %8.4f\n", name, dp, f_ours, f_meg, floor,
                        max_over_mean_ns(params, mine), max_over_mean_ns(params, baseline));
          }
        }
      }
    }
  }
  std::printf("mean padding fraction over %d buffers: ours %.5f, lpt-floor %.5f, floor %.5f\n",
              cases, sum_ours / cases, sum_baseline / cases, sum_floor / cases);
  EXPECT_GT(strictly_better, cases / 2);
}

TEST(BaselineComparison, DeepSeekV3SizedMoeLaysOutAndValidates) {
  SW_SKIP_UNDER_SANITIZERS();
  const ParamList params = layout_test::deepseek_v3_like();
  for (int expert_dp : {64, 1024}) {
    LayoutOptions options;
    options.data_parallel_size = 1024;
    options.expert_data_parallel_size = expert_dp;
    options.bucket_size = 1'000'000LL * 1024;
    const FullParamLayout full = compute_full_param_layout(params, options);
    ASSERT_NO_THROW(validate_full_layout(params, full, options));
    for (const auto& [key, layout] : full.layouts) {
      std::printf(
          "deepseek-v3 dp 1024 expert-dp %4d %-44s params %6zu buckets %4zu padding %.5f\n",
          expert_dp, key.to_string().c_str(), layout.param_index_map.size(),
          layout.bucket_indices.size(),
          static_cast<double>(layout_test::padding_elements(params, layout)) / layout.numel());
      if (key.is_expert_parallel) {
        // 58 x 256 x 3 = 44544 identical expert matrices: perfect when expert dp divides the
        // count (64), else at the floor of one matrix more on some shards (1024: 43.5 per rank).
        const double fraction =
            static_cast<double>(layout_test::padding_elements(params, layout)) / layout.numel();
        if (expert_dp == 64) {
          EXPECT_EQ(fraction, 0.0);
        } else {
          EXPECT_LE(fraction, 1.0 - 43.5 / 44.0 + 1e-12);
        }
      }
    }
  }
}

}  // namespace
}  // namespace shardwise
