// Cut modes of the layer-wise layout: overlap-aware cuts (the default) and plain cuts
// (LayoutOptions::overlap_aware_cuts = false; `--plain-cuts`, ddp.layer_wise_cuts: plain), which
// reproduce the layouts from before overlap-aware cuts became the default.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "sanitizer_budget.hpp"
#include "shardwise/core/dtype.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/layout/layout_algorithms.hpp"
#include "shardwise/layout/layout_cost.hpp"
#include "shardwise/layout/layout_report.hpp"
#include "shardwise/layout/layout_stats.hpp"
#include "shardwise/layout/model_zoo.hpp"

namespace shardwise {
namespace {

LayoutOptions megatron_options(int dp) {
  LayoutOptions options;
  options.data_parallel_size = dp;
  options.bucket_size = default_bucket_size(dp);
  return options;
}

// FNV-1a over every buffer's bucket ranges and every param's (id, start, end, bucket): equal
// fingerprints mean the same layout, element for element.
std::uint64_t fingerprint(const FullParamLayout& layout) {
  std::uint64_t h = 14695981039346656037ull;
  auto mix = [&h](std::int64_t v) {
    for (int byte = 0; byte < 8; ++byte) {
      h ^= static_cast<std::uint64_t>(v >> (8 * byte)) & 0xffu;
      h *= 1099511628211ull;
    }
  };
  for (const auto& [key, buffer] : layout.layouts) {
    mix(key.is_layer_wise);
    mix(key.is_expert_parallel);
    for (const BucketRange& b : buffer.bucket_indices) {
      mix(b.start);
      mix(b.end);
    }
    for (const ParamRange& r : buffer.param_index_map) {
      mix(static_cast<std::int64_t>(r.param));
      mix(r.start);
      mix(r.end);
      mix(r.bucket);
    }
  }
  return h;
}

TEST(CutMode, OverlapAwareCutsAreTheDefault) {
  EXPECT_TRUE(LayoutOptions{}.overlap_aware_cuts);
  EXPECT_TRUE(BufferLayoutInput{}.overlap_aware_cuts);
}

// Plain cuts with one shard group (S = dp) give the zoo layouts of the plain cut search exactly
// as before overlap-aware cuts became the default (fingerprints taken from those layouts).
TEST(CutMode, PlainCutsWithSEqualDpReproduceThePinnedZooLayouts) {
  SW_SKIP_UNDER_SANITIZERS();
  const std::map<std::pair<std::string, int>, std::uint64_t> pinned = {
      {{"gpt-tiny", 8}, 14707580897175339182ull},
      {{"gpt-tiny", 64}, 8482365910840875820ull},
      {{"moe-tiny", 8}, 12508721366826748421ull},
      {{"moe-tiny", 64}, 10397954473547960256ull},
      {{"gpt-small", 8}, 15151084936632074413ull},
      {{"gpt-small", 64}, 15450203651770572393ull},
      {{"gpt3-175b", 8}, 4342054921069641921ull},
      {{"gpt3-175b", 64}, 2574364060050768625ull},
      {{"llama3-8b", 8}, 952079987278184839ull},
      {{"llama3-8b", 64}, 16433669552036798071ull},
      {{"llama3-70b", 8}, 5107059716256314632ull},
      {{"llama3-70b", 64}, 470085474085258736ull},
      {{"llama3-405b", 8}, 369741516107173924ull},
      {{"llama3-405b", 64}, 2128839724456760343ull},
      {{"mixtral-8x7b", 8}, 12505646665552083281ull},
      {{"mixtral-8x7b", 64}, 18016240497518973241ull},
      {{"deepseek-v3", 8}, 11199106626732143198ull},
      {{"deepseek-v3", 64}, 12352870557513261123ull},
  };
  for (const std::string& name : bundled_model_names()) {
    const ParamList params = bundled_model_spec(name).params;
    for (const int dp : {8, 64}) {
      LayoutOptions options = megatron_options(dp);
      options.overlap_aware_cuts = false;
      const FullParamLayout unset = compute_full_param_layout(params, options);
      options.layer_wise_shard_group_size = dp;
      const FullParamLayout layout = compute_full_param_layout(params, options);
      EXPECT_EQ(layout, unset) << name << " dp " << dp;
      const auto it = pinned.find({name, dp});
      if (it == pinned.end()) {
        ADD_FAILURE() << "not pinned: {{\"" << name << "\", " << dp << "}, " << fingerprint(layout)
                      << "ull},";
        continue;
      }
      EXPECT_EQ(fingerprint(layout), it->second) << name << " dp " << dp;
    }
  }
}

// The JSON report's per-buffer cost block: exposed reduce-scatter bytes are those of the last
// bucket, (S-1)/S x its numel x grad dtype size, padding next to them; the totals sum the
// buffers; the cut mode is named.
TEST(CutMode, ReportShowsExposedBytesAndPaddingPerBuffer) {
  const ParamList params = bundled_model_spec("gpt-small").params;
  int multi_bucket = 0;
  for (const bool aware : {false, true}) {
    for (const int s : {2, 8}) {
      SCOPED_TRACE(str_cat(aware ? "overlap-aware" : "plain", " S ", s));
      LayoutOptions options;
      options.data_parallel_size = 8;
      options.bucket_size = 5'000'000;
      options.layer_wise_shard_group_size = s;
      options.overlap_aware_cuts = aware;
      const FullParamLayout layout = compute_full_param_layout(params, options);
      const LayoutStats stats = compute_layout_stats(params, layout, options);
      const LayoutReportInput input{"gpt-small", &params, &layout, &options, &stats, nullptr};
      const auto doc = nlohmann::json::parse(render_layout_json(input));
      EXPECT_EQ(doc["layer_wise_cuts"], aware ? "overlap_aware" : "plain");
      std::int64_t exposed_total = 0;
      int layer_wise = 0;
      for (const auto& buffer : doc["buffers"]) {
        const auto& buckets = buffer["buckets"];
        ASSERT_FALSE(buckets.empty());
        const std::int64_t last =
            buckets.back()["end"].get<std::int64_t>() - buckets.back()["start"].get<std::int64_t>();
        const int shards = buffer["num_shards"].get<int>();
        const std::int64_t grad_bytes = static_cast<std::int64_t>(
            dtype_size(dtype_from_name(buffer["grad_dtype"].get<std::string>(), "grad_dtype")));
        const std::int64_t expected = last / shards * (shards - 1) * grad_bytes;
        EXPECT_EQ(buffer["cost"]["exposed_rs_bytes"].get<std::int64_t>(), expected);
        const auto numel = buffer["numel"].get<std::int64_t>();
        const auto unpadded = buffer["numel_unpadded"].get<std::int64_t>();
        EXPECT_EQ(buffer["cost"]["padding_numel"].get<std::int64_t>(), numel - unpadded);
        EXPECT_DOUBLE_EQ(buffer["cost"]["padding_fraction"].get<double>(),
                         static_cast<double>(numel - unpadded) / static_cast<double>(numel));
        if (buffer["layer_wise"].get<bool>()) {
          ++layer_wise;
          EXPECT_EQ(shards, s);
          multi_bucket += buckets.size() > 1;  // "last" is not simply the whole buffer
        }
        exposed_total += expected;
      }
      EXPECT_EQ(layer_wise, 1);
      EXPECT_EQ(doc["totals"]["cost"]["exposed_rs_bytes"].get<std::int64_t>(), exposed_total);
      const std::string text = render_layout_text(input);
      EXPECT_NE(text.find(aware ? "overlap_aware cuts" : "plain cuts"), std::string::npos);
      EXPECT_NE(text.find("exposed last-bucket reduce-scatter"), std::string::npos);
    }
  }
  EXPECT_GT(multi_bucket, 0);
}

}  // namespace
}  // namespace shardwise
