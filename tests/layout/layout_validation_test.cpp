// validate_layout rejects layouts that break an invariant.
#include <gtest/gtest.h>

#include "layout/layout_test_models.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/layout/layout_algorithms.hpp"

namespace shardwise {
namespace {

using layout_test::matrix;

struct Fixture {
  ParamList params;
  LayoutOptions options;
  BufferKey key{DType::kBFloat16, DType::kFloat32, false, true};
  PerBufferParamLayout layout;
};

Fixture make() {
  Fixture f;
  for (int i = 0; i < 8; ++i) f.params.push_back(matrix(str_cat("w", i), 64 * (1 + i % 3), 64));
  f.options.data_parallel_size = 4;
  f.options.bucket_size = 20000;
  f.layout = compute_full_param_layout(f.params, f.options).layouts.at(f.key);
  return f;
}

TEST(LayoutValidation, AcceptsComputedLayout) {
  Fixture f = make();
  EXPECT_NO_THROW(validate_layout(f.params, f.layout, f.key, f.options));
  EXPECT_NO_THROW(validate_layer_wise_bucket_cuts(f.params, f.layout));
}

TEST(LayoutValidation, RejectsBrokenLayouts) {
  auto expect_broken = [](Fixture f, auto&& corrupt, const char* what) {
    corrupt(f);
    EXPECT_THROW(validate_layout(f.params, f.layout, f.key, f.options), InvariantError) << what;
  };
  expect_broken(
      make(), [](Fixture& f) { f.layout.num_shards = 2; }, "num_shards");
  expect_broken(
      make(), [](Fixture& f) { f.layout.shard_aligned = false; }, "flag");
  expect_broken(
      make(),
      [](Fixture& f) {
        f.layout.param_index_map[0].start += 64, f.layout.param_index_map[0].end += 64;
      },
      "overlap or outside");
  expect_broken(
      make(),
      [](Fixture& f) {
        f.layout.param_index_map[0].start += 1, f.layout.param_index_map[0].end += 1;
      },
      "alignment");
  expect_broken(
      make(),
      [](Fixture& f) { std::swap(f.layout.param_index_map[0], f.layout.param_index_map[1]); },
      "order");
  expect_broken(
      make(), [](Fixture& f) { f.layout.bucket_indices.back().end += 128; }, "shard size");
  expect_broken(
      make(), [](Fixture& f) { f.layout.per_bucket_numel_unpadded[0] += 1; }, "unpadded");
  expect_broken(
      make(), [](Fixture& f) { f.layout.param_indices.pop_back(); }, "indices");
  expect_broken(
      make(),
      [](Fixture& f) {
        f.params[7].shape = {64, 65};
      },
      "size");
  // A param straddling two shards.
  expect_broken(
      make(),
      [](Fixture& f) {
        const std::int64_t shard = f.layout.shard_size(0);
        auto& r = f.layout.param_index_map[0];
        const std::int64_t n = r.numel();
        r.start = f.layout.bucket_indices[0].start + shard - 64;
        r.end = r.start + n;
      },
      "crossing");
}

TEST(LayoutValidation, BucketCutRuleCatchesUnabsorbedParam) {
  // Two buckets where the second's param fits into the first's padding.
  ParamList params = {matrix("small", 1, 64), matrix("big", 100, 64)};
  PerBufferParamLayout layout;
  layout.num_shards = 2;
  layout.shard_aligned = true;
  layout.param_index_map = {{1, 0, 6400, 0}, {0, 12800, 12864, 1}};
  layout.param_indices = {1, 0};
  layout.bucket_indices = {{0, 12800}, {12800, 12928}};
  layout.per_bucket_numel_unpadded = {6400, 64};
  LayoutOptions options;
  options.data_parallel_size = 2;
  options.bucket_size = 6400;
  const BufferKey key{DType::kBFloat16, DType::kFloat32, false, true};
  EXPECT_NO_THROW(validate_layout(params, layout, key, options));
  EXPECT_THROW(validate_layer_wise_bucket_cuts(params, layout), InvariantError);
  EXPECT_EQ(layout.owner_shard(layout.param_index_map[1]), 0);
  EXPECT_EQ(layout.find(0), &layout.param_index_map[1]);
  EXPECT_EQ(layout.find(5), nullptr);
}

}  // namespace
}  // namespace shardwise
