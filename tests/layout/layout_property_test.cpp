// Property tests: random models and options; every layout is checked by the library's validator
// and by the independent checker of layout_test_models.hpp; shard-aligned buffers are compared
// with the LPT + padding-floor baseline. Seeded, so a failing case reproduces from its number.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <random>

#include "layout/layout_test_models.hpp"
#include "sanitizer_budget.hpp"
#include "shardwise/layout/baseline_layouts.hpp"
#include "shardwise/layout/buffer_grouping.hpp"
#include "shardwise/layout/layout_algorithms.hpp"
#include "shardwise/layout/layout_cost.hpp"

namespace shardwise {
namespace {

using layout_test::shape_numel;

struct Case {
  ParamList params;
  LayoutOptions options;
};

std::int64_t pick(std::mt19937_64& rng, std::int64_t lo, std::int64_t hi) {
  return lo + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(hi - lo + 1));
}

ParamInfo random_param(std::mt19937_64& rng, const std::string& name) {
  ParamInfo p;
  p.name = name;
  const auto dim = [&] {
    // Mostly "nice" sizes (multiples of 64), sometimes odd ones.
    return rng() % 3 == 0 ? pick(rng, 1, 3000) : 64 * pick(rng, 1, 40);
  };
  switch (rng() % 6) {
    case 0:
      p.shape = {dim()};
      break;
    case 1:
      p.shape = {pick(rng, 1, 8), pick(rng, 1, 64), pick(rng, 1, 64)};
      break;
    default:
      p.shape = {dim(), dim()};
      break;
  }
  if (p.is_2d() && rng() % 8 == 0 && p.shape[0] >= 3) {
    const std::int64_t q = p.shape[0] / 2, k = (p.shape[0] - q) / 2;
    p.qkv_split = {q, k, p.shape[0] - q - k};
  }
  if (rng() % 20 == 0) p.use_muon = false;
  if (rng() % 30 == 0) p.embedding_or_output = true;
  if (rng() % 5 == 0) p.expert_parallel = true;
  const auto d = rng() % 10;
  p.dtype = d == 0 ? DType::kFloat32 : d == 1 ? DType::kFloat8E4M3 : DType::kBFloat16;
  return p;
}

Case random_case(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  Case c;
  const int n = static_cast<int>(pick(rng, 1, 500));
  if (rng() % 2 == 0) {
    // Repeated blocks, like transformer layers.
    std::vector<ParamInfo> block;
    const int block_size = static_cast<int>(pick(rng, 1, 12));
    for (int i = 0; i < block_size; ++i) block.push_back(random_param(rng, str_cat("b", i)));
    for (int i = 0; static_cast<int>(c.params.size()) < n; ++i) {
      ParamInfo p = block[static_cast<std::size_t>(i % block_size)];
      p.name = str_cat("l", i / block_size, ".", p.name);
      c.params.push_back(p);
    }
  } else {
    for (int i = 0; i < n; ++i) c.params.push_back(random_param(rng, str_cat("p", i)));
  }
  if (rng() % 3 == 0) {  // tied embeddings, first and last
    ParamInfo emb = layout_test::matrix("embedding", pick(rng, 100, 5000), 64 * pick(rng, 1, 8));
    emb.shared_embedding = emb.embedding_or_output = true;
    c.params.insert(c.params.begin(), emb);
    emb.name = "output";
    c.params.push_back(emb);
  }
  if (rng() % 6 == 0)
    c.params[static_cast<std::size_t>(pick(rng, 0, static_cast<std::int64_t>(c.params.size()) - 1))]
        .shared_embedding = true;
  const int dps[] = {1, 2, 3, 4, 6, 8, 16, 64, 256};
  c.options.data_parallel_size = dps[rng() % 9];
  if (rng() % 2 == 0) c.options.expert_data_parallel_size = dps[rng() % 9];
  if (rng() % 5 != 0) {
    // Log-uniform between 1e3 and 1e8.
    c.options.bucket_size = static_cast<std::int64_t>(
        std::pow(10.0, 3.0 + 5.0 * static_cast<double>(rng() % 10000) / 10000.0));
  }
  const auto a = rng() % 6;
  c.options.algorithm = a == 0   ? LayoutAlgorithm::kDefault
                        : a == 1 ? LayoutAlgorithm::kDistributed
                                 : LayoutAlgorithm::kLayerWise;
  c.options.all_layer_wise = rng() % 3 == 0;
  c.options.grad_reduce_in_fp32 = rng() % 3 != 0;
  c.options.pad_buckets_for_high_nccl_busbw = rng() % 5 == 0;
  // Half the cases lay the layer-wise buffers out for a shard group: a random divisor S of dp.
  if (rng() % 2 == 0) {
    std::vector<int> divisors;
    for (int s = 1; s <= c.options.data_parallel_size; ++s) {
      if (c.options.data_parallel_size % s == 0) divisors.push_back(s);
    }
    c.options.layer_wise_shard_group_size = divisors[rng() % divisors.size()];
  }
  c.options.overlap_aware_cuts = rng() % 4 == 0;
  return c;
}

bool expected_layer_wise(const ParamInfo& p, const LayoutOptions& o) {
  if (o.algorithm != LayoutAlgorithm::kLayerWise) return false;
  if (o.all_layer_wise) return true;
  const bool muon_ok = !p.use_muon.has_value() || *p.use_muon;
  return muon_ok && p.shape.size() == 2 && !p.embedding_or_output && !p.shared_embedding;
}

TEST(LayoutProperty, RandomModelsSatisfyEveryInvariant) {
  constexpr int kCases = test::sweep_cases(200);
  int shard_aligned_buffers = 0, better = 0, worse = 0;
  double ours_padding = 0, baseline_padding = 0;
  for (int seed = 0; seed < kCases; ++seed) {
    const Case c = random_case(static_cast<std::uint64_t>(seed));
    SCOPED_TRACE(str_cat("case ", seed));
    const FullParamLayout full = compute_full_param_layout(c.params, c.options);
    ASSERT_NO_THROW(validate_full_layout(c.params, full, c.options));

    // Independent grouping: each param exactly once, in the buffer its flags call for.
    std::vector<int> seen(c.params.size(), 0);
    for (const auto& [key, layout] : full.layouts) {
      std::vector<ParamId> ids;
      for (const auto& r : layout.param_index_map) {
        const ParamInfo& p = c.params[r.param];
        ++seen[r.param];
        EXPECT_EQ(key.is_expert_parallel, p.expert_parallel);
        EXPECT_EQ(key.is_layer_wise, expected_layer_wise(p, c.options)) << p.name;
        EXPECT_EQ(key.param_dtype, p.dtype == DType::kFloat8E4M3 ? DType::kUInt8 : p.dtype);
        ids.push_back(r.param);
      }
      std::reverse(ids.begin(), ids.end());  // forward order
      const int group_dp =
          key.is_expert_parallel ? c.options.expert_dp() : c.options.data_parallel_size;
      // Element-sharded buffers keep the whole DP group; shard-aligned ones use the shard group.
      const int dp = layout.shard_aligned ? c.options.num_shards_for(true, group_dp) : group_dp;
      // Plain DDP buffers are all-reduced whole: one shard.
      EXPECT_EQ(layout.num_shards, c.options.algorithm == LayoutAlgorithm::kDefault ? 1 : dp);
      if (c.options.layer_wise_shard_group_size && layout.shard_aligned) {
        EXPECT_EQ(group_dp % dp, 0) << key.to_string();
        if (!key.is_expert_parallel) {
          EXPECT_EQ(dp, *c.options.layer_wise_shard_group_size);
        }
      }
      if (!layout.shard_aligned) continue;
      ++shard_aligned_buffers;
      ASSERT_EQ(layout_test::check_shard_aligned(c.params, layout, ids, dp,
                                                 c.options.pad_buckets_for_high_nccl_busbw,
                                                 c.options.bucket_size, true),
                "")
          << key.to_string();
      BufferLayoutInput input;
      input.params = &c.params;
      input.buffer_params = ids;
      input.param_indices.assign(layout.param_indices.rbegin(), layout.param_indices.rend());
      input.bucket_size = c.options.bucket_size;
      input.data_parallel_size = dp;
      input.pad_for_high_nccl_busbw = c.options.pad_buckets_for_high_nccl_busbw;
      input.overlap_aware_cuts = c.options.overlap_aware_cuts;
      const auto baseline = compute_lpt_floor_layer_wise_layout(input);
      ASSERT_EQ(
          layout_test::check_shard_aligned(c.params, baseline, ids, dp,
                                           input.pad_for_high_nccl_busbw, input.bucket_size, false),
          "");
      const auto ours_pad = layout_test::padding_elements(c.params, layout);
      const auto base_pad = layout_test::padding_elements(c.params, baseline);
      better += ours_pad < base_pad;
      worse += ours_pad > base_pad;
      ours_padding += static_cast<double>(ours_pad) / static_cast<double>(layout.numel());
      baseline_padding += static_cast<double>(base_pad) / static_cast<double>(baseline.numel());
      // Determinism: the same input gives the same layout.
      EXPECT_EQ(compute_layer_wise_layout(input), layout);
    }
    for (std::size_t id = 0; id < seen.size(); ++id) EXPECT_EQ(seen[id], 1) << id;
  }
  std::printf(
      "[layout property] %d shard-aligned buffers: ours better %d, worse %d; mean padding "
      "fraction ours %.4f vs lpt-floor %.4f\n",
      shard_aligned_buffers, better, worse, ours_padding / shard_aligned_buffers,
      baseline_padding / shard_aligned_buffers);
  EXPECT_GT(shard_aligned_buffers, kCases);
}

// A shard group as large as dp is today's layout, bit for bit, on every random model.
TEST(LayoutProperty, ShardGroupOfDpReproducesTheSingleGroupLayout) {
  for (int seed = 0; seed < test::sweep_cases(120); ++seed) {
    Case c = random_case(static_cast<std::uint64_t>(seed));
    SCOPED_TRACE(str_cat("case ", seed));
    c.options.layer_wise_shard_group_size.reset();
    const FullParamLayout single = compute_full_param_layout(c.params, c.options);
    c.options.layer_wise_shard_group_size = c.options.data_parallel_size;
    EXPECT_EQ(compute_full_param_layout(c.params, c.options), single);
  }
}

// Every divisor S of dp, both cut modes: every invariant holds per shard group (the library's
// validator and the independent checker, with S shards), and overlap-aware cuts pad at most half
// a point of the buffer more than plain ones, never expose more reduce-scatter bytes and never
// make fewer buckets.
TEST(LayoutProperty, BothCutModesHoldEveryInvariantForEveryShardGroupSize) {
  int compared = 0, fewer_exposed = 0;
  constexpr int kCases = test::sweep_cases(60);
  for (int seed = 0; seed < kCases; ++seed) {
    Case c = random_case(static_cast<std::uint64_t>(seed));
    c.options.algorithm = LayoutAlgorithm::kLayerWise;
    const int dp = c.options.data_parallel_size;
    for (int s = 1; s <= dp; ++s) {
      if (dp % s != 0) continue;
      SCOPED_TRACE(str_cat("case ", seed, " dp ", dp, " S ", s));
      c.options.layer_wise_shard_group_size = s;
      FullParamLayout by_mode[2];
      for (const bool aware : {false, true}) {
        c.options.overlap_aware_cuts = aware;
        by_mode[aware ? 1 : 0] = compute_full_param_layout(c.params, c.options);
        ASSERT_NO_THROW(validate_full_layout(c.params, by_mode[aware ? 1 : 0], c.options));
        for (const auto& [key, layout] : by_mode[aware ? 1 : 0].layouts) {
          if (!layout.shard_aligned) continue;
          const int group_dp = key.is_expert_parallel ? c.options.expert_dp() : dp;
          const int shards = c.options.num_shards_for(true, group_dp);
          EXPECT_EQ(layout.num_shards, shards);
          std::vector<ParamId> ids;
          for (const auto& r : layout.param_index_map) ids.push_back(r.param);
          std::reverse(ids.begin(), ids.end());  // forward order
          ASSERT_EQ(layout_test::check_shard_aligned(c.params, layout, ids, shards,
                                                     c.options.pad_buckets_for_high_nccl_busbw,
                                                     c.options.bucket_size, true),
                    "")
              << key.to_string() << (aware ? " overlap-aware" : " plain");
        }
      }
      c.options.overlap_aware_cuts = true;
      const LayoutCost plain = compute_layout_cost(by_mode[0], c.options);
      const LayoutCost aware = compute_layout_cost(by_mode[1], c.options);
      ASSERT_EQ(plain.buffers.size(), aware.buffers.size());
      for (std::size_t i = 0; i < plain.buffers.size(); ++i) {
        const auto& [key, p] = plain.buffers[i];
        const BufferCost& a = aware.buffers[i].second;
        if (!key.is_layer_wise) {
          EXPECT_EQ(by_mode[1].layouts.at(key), by_mode[0].layouts.at(key)) << key.to_string();
          continue;
        }
        ++compared;
        fewer_exposed += a.exposed_rs_bytes < p.exposed_rs_bytes;
        EXPECT_LE(
            static_cast<double>(a.padding_numel()),
            static_cast<double>(p.padding_numel()) + 0.005 * static_cast<double>(p.numel_padded))
            << key.to_string();
        EXPECT_LE(a.exposed_rs_bytes, p.exposed_rs_bytes) << key.to_string();
        EXPECT_GE(by_mode[1].layouts.at(key).bucket_indices.size(),
                  by_mode[0].layouts.at(key).bucket_indices.size())
            << key.to_string();
      }
    }
  }
  std::printf("[layout property] %d layer-wise buffers, overlap-aware cuts expose less in %d\n",
              compared, fewer_exposed);
  EXPECT_GT(compared, kCases * 5 / 3);
  // The objective does something on random models too (seen over the whole sweep).
  if (!test::kSanitizedBuild) {
    EXPECT_GT(fewer_exposed, 0);
  }
}

}  // namespace
}  // namespace shardwise
