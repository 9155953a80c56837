#include "shardwise/layout/buffer_grouping.hpp"

#include <gtest/gtest.h>

#include "layout/layout_test_models.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/layout/layout_algorithms.hpp"

namespace shardwise {
namespace {

using layout_test::matrix;
using layout_test::vec;

TEST(BufferGrouping, KeyDtypes) {
  LayoutOptions options;
  options.algorithm = LayoutAlgorithm::kDistributed;
  ParamInfo bf16 = matrix("w", 4, 4);
  ParamInfo fp8 = matrix("w8", 4, 4);
  fp8.dtype = DType::kFloat8E4M3;
  ParamInfo explicit_grad = vec("b", 4);
  explicit_grad.grad_dtype = DType::kFloat16;

  options.grad_reduce_in_fp32 = true;
  EXPECT_EQ(buffer_key_for(bf16, options), (BufferKey{DType::kBFloat16, DType::kFloat32}));
  EXPECT_EQ(buffer_key_for(fp8, options), (BufferKey{DType::kUInt8, DType::kFloat32}));
  EXPECT_EQ(buffer_key_for(explicit_grad, options), (BufferKey{DType::kBFloat16, DType::kFloat16}));
  options.grad_reduce_in_fp32 = false;
  EXPECT_EQ(buffer_key_for(bf16, options), (BufferKey{DType::kBFloat16, DType::kBFloat16}));
  // fp8 params reduce in their high-precision dtype.
  EXPECT_EQ(buffer_key_for(fp8, options), (BufferKey{DType::kUInt8, DType::kBFloat16}));
  EXPECT_EQ(buffer_key_for(explicit_grad, options), (BufferKey{DType::kBFloat16, DType::kFloat16}));
}

TEST(BufferGrouping, ExpertAndLayerWiseFlags) {
  LayoutOptions options;
  options.algorithm = LayoutAlgorithm::kLayerWise;
  ParamInfo w = matrix("w", 4, 4);
  ParamInfo b = vec("b", 4);
  ParamInfo expert = matrix("e", 4, 4);
  expert.expert_parallel = true;
  EXPECT_TRUE(buffer_key_for(w, options).is_layer_wise);
  EXPECT_FALSE(buffer_key_for(b, options).is_layer_wise);
  EXPECT_TRUE(buffer_key_for(expert, options).is_expert_parallel);
  EXPECT_TRUE(buffer_key_for(expert, options).is_layer_wise);
  options.all_layer_wise = true;
  EXPECT_TRUE(buffer_key_for(b, options).is_layer_wise);
  options.algorithm = LayoutAlgorithm::kDistributed;
  EXPECT_FALSE(buffer_key_for(w, options).is_layer_wise);
  EXPECT_FALSE(buffer_key_for(b, options).is_layer_wise);
}

TEST(BufferGrouping, ParamIndicesCountSameHighPrecisionDtype) {
  // Megatron's case 2: [p1(bf16), p2(fp8), p3(fp8), p4(bf16)] -> bf16 buffer [0, 3], uint8 [1, 2].
  ParamList params = {vec("p1", 8), vec("p2", 8), vec("p3", 8), vec("p4", 8)};
  params[1].dtype = params[2].dtype = DType::kFloat8E4M3;
  LayoutOptions options;
  options.algorithm = LayoutAlgorithm::kDistributed;
  const auto groups = group_params_for_buffers(params, options);
  ASSERT_EQ(groups.size(), 2u);
  const auto& bf16 = groups.at(BufferKey{DType::kBFloat16, DType::kFloat32});
  const auto& u8 = groups.at(BufferKey{DType::kUInt8, DType::kFloat32});
  EXPECT_EQ(bf16.params, (std::vector<ParamId>{0, 3}));
  EXPECT_EQ(bf16.param_indices, (std::vector<std::int64_t>{0, 3}));
  EXPECT_EQ(u8.params, (std::vector<ParamId>{1, 2}));
  EXPECT_EQ(u8.param_indices, (std::vector<std::int64_t>{1, 2}));
}

TEST(BufferGrouping, ExpertParamsCountedSeparately) {
  ParamList params = {matrix("a", 4, 4), matrix("e0", 4, 4), matrix("b", 4, 4), matrix("e1", 4, 4)};
  params[1].expert_parallel = params[3].expert_parallel = true;
  LayoutOptions options;
  options.algorithm = LayoutAlgorithm::kDistributed;
  const auto groups = group_params_for_buffers(params, options);
  ASSERT_EQ(groups.size(), 2u);
  BufferKey expert_key{DType::kBFloat16, DType::kFloat32, true, false};
  EXPECT_EQ(groups.at(expert_key).params, (std::vector<ParamId>{1, 3}));
  EXPECT_EQ(groups.at(expert_key).param_indices, (std::vector<std::int64_t>{0, 1}));
}

TEST(BufferGrouping, LayerWiseAndAdamBuffersHaveSeparateIndexSpaces) {
  // A small GPT in forward order: emb, then per layer norm, qkv, proj, norm, fc1, fc2; then the
  // final norm and the output layer. Each buffer counts its own params from 0 in forward order.
  ParamList params;
  ParamInfo emb = matrix("emb", 100, 16);
  emb.embedding_or_output = true;
  params.push_back(emb);
  for (int layer = 0; layer < 2; ++layer) {
    params.push_back(vec(str_cat("l", layer, ".norm1"), 16));
    params.push_back(matrix(str_cat("l", layer, ".qkv"), 48, 16));
    params.push_back(matrix(str_cat("l", layer, ".proj"), 16, 16));
    params.push_back(vec(str_cat("l", layer, ".norm2"), 16));
    params.push_back(matrix(str_cat("l", layer, ".fc1"), 64, 16));
    params.push_back(matrix(str_cat("l", layer, ".fc2"), 16, 64));
  }
  params.push_back(vec("final_norm", 16));
  ParamInfo out = emb;
  out.name = "out";
  params.push_back(out);
  // An fp8-stored matrix shares the counter of the bf16 layer-wise params.
  params[3].dtype = DType::kFloat8E4M3;

  LayoutOptions options;
  options.algorithm = LayoutAlgorithm::kLayerWise;
  const auto groups = group_params_for_buffers(params, options);
  const auto& adam = groups.at(BufferKey{DType::kBFloat16, DType::kFloat32, false, false});
  EXPECT_EQ(adam.params, (std::vector<ParamId>{0, 1, 4, 7, 10, 13, 14}));
  EXPECT_EQ(adam.param_indices, (std::vector<std::int64_t>{0, 1, 2, 3, 4, 5, 6}));
  const auto& matrices = groups.at(BufferKey{DType::kBFloat16, DType::kFloat32, false, true});
  EXPECT_EQ(matrices.params, (std::vector<ParamId>{2, 5, 6, 8, 9, 11, 12}));
  EXPECT_EQ(matrices.param_indices, (std::vector<std::int64_t>{0, 2, 3, 4, 5, 6, 7}));
  const auto& fp8 = groups.at(BufferKey{DType::kUInt8, DType::kFloat32, false, true});
  EXPECT_EQ(fp8.params, (std::vector<ParamId>{3}));
  EXPECT_EQ(fp8.param_indices, (std::vector<std::int64_t>{1}));

  // Without the layer-wise split (DistributedOptimizer) one bf16 index space spans everything
  // (the fp8 param keeps its slot, so each index is the param's forward position).
  options.algorithm = LayoutAlgorithm::kDistributed;
  const auto dist = group_params_for_buffers(params, options);
  const auto& all = dist.at(BufferKey{DType::kBFloat16, DType::kFloat32});
  ASSERT_EQ(all.params.size(), 14u);
  for (std::size_t i = 0; i < all.params.size(); ++i) {
    EXPECT_EQ(all.param_indices[i], static_cast<std::int64_t>(all.params[i]));
  }
}

// Routing of buffers to algorithms.
TEST(FullParamLayout, RoutesBuffersToAlgorithms) {
  ParamList params;
  ParamInfo emb = matrix("emb", 1000, 64);
  emb.shared_embedding = emb.embedding_or_output = true;
  params.push_back(emb);
  params.push_back(vec("norm", 64));
  params.push_back(matrix("w1", 256, 64));
  params.push_back(matrix("w2", 64, 256));
  for (int e = 0; e < 4; ++e) {
    ParamInfo ex = matrix(str_cat("expert", e), 128, 64);
    ex.expert_parallel = true;
    params.push_back(ex);
  }
  ParamInfo out = emb;
  out.name = "out";
  params.push_back(out);

  LayoutOptions options;
  options.algorithm = LayoutAlgorithm::kLayerWise;
  options.data_parallel_size = 4;
  options.expert_data_parallel_size = 2;
  const FullParamLayout lw = compute_full_param_layout(params, options);
  ASSERT_EQ(lw.layouts.size(), 3u);
  const BufferKey dense_lw{DType::kBFloat16, DType::kFloat32, false, true};
  const BufferKey dense_adam{DType::kBFloat16, DType::kFloat32, false, false};
  const BufferKey expert_lw{DType::kBFloat16, DType::kFloat32, true, true};
  EXPECT_TRUE(lw.layouts.at(dense_lw).shard_aligned);
  EXPECT_EQ(lw.layouts.at(dense_lw).param_index_map.size(), 2u);
  EXPECT_FALSE(lw.layouts.at(dense_adam).shard_aligned);
  EXPECT_EQ(lw.layouts.at(dense_adam).param_index_map.size(), 3u);  // emb, norm, out
  EXPECT_EQ(lw.layouts.at(expert_lw).num_shards, 2);
  EXPECT_EQ(lw.layouts.at(dense_lw).num_shards, 4);
  EXPECT_NO_THROW(validate_full_layout(params, lw, options));
  const auto found = lw.find(3);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->first, dense_lw);
  EXPECT_EQ(found->second.param, 3u);
  EXPECT_FALSE(lw.find(99).has_value());

  // The Adam buffer gets the DistributedOptimizer layout: identical to computing it directly.
  BufferLayoutInput input;
  input.params = &params;
  input.buffer_params = {0, 1, 8};
  input.param_indices = {0, 1, 2};  // the Adam buffer's own index space
  input.data_parallel_size = 4;
  EXPECT_EQ(lw.layouts.at(dense_adam), compute_dist_opt_layout(input));

  options.all_layer_wise = true;
  const FullParamLayout all = compute_full_param_layout(params, options);
  for (const auto& [key, layout] : all.layouts) {
    EXPECT_TRUE(key.is_layer_wise);
    EXPECT_TRUE(layout.shard_aligned);
  }
  EXPECT_NO_THROW(validate_full_layout(params, all, options));

  options.all_layer_wise = false;
  options.algorithm = LayoutAlgorithm::kDistributed;
  const FullParamLayout dist = compute_full_param_layout(params, options);
  ASSERT_EQ(dist.layouts.size(), 2u);
  for (const auto& [key, layout] : dist.layouts) {
    EXPECT_FALSE(key.is_layer_wise);
    EXPECT_FALSE(layout.shard_aligned);
  }

  options.algorithm = LayoutAlgorithm::kDefault;
  const FullParamLayout plain = compute_full_param_layout(params, options);
  for (const auto& [key, layout] : plain.layouts) {
    std::int64_t content = 0;
    for (const auto& r : layout.param_index_map) content += r.numel();
    EXPECT_EQ(layout.numel(), content) << "default layout has no padding";
  }

  options.data_parallel_size = 0;
  EXPECT_THROW(compute_full_param_layout(params, options), InvalidArgument);
}

}  // namespace
}  // namespace shardwise
