#include "shardwise/layout/param_info.hpp"

#include <gtest/gtest.h>

#include "layout/layout_test_models.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise {
namespace {

using layout_test::matrix;
using layout_test::vec;

TEST(ParamInfo, Numel) {
  ParamInfo scalar;
  EXPECT_EQ(scalar.numel(), 1);
  ParamInfo p;
  p.shape = {3, 4, 5};
  EXPECT_EQ(p.numel(), 60);
  p.shape = {3, 0};
  EXPECT_EQ(p.numel(), 0);
  p.shape = {3, -1};
  EXPECT_THROW(p.numel(), ShapeError);
}

TEST(ParamInfo, ManagedByLayerWiseOptimizer) {
  EXPECT_TRUE(is_managed_by_layer_wise_optimizer(matrix("w", 4, 8)));
  EXPECT_FALSE(is_managed_by_layer_wise_optimizer(vec("b", 8)));
  ParamInfo cube;
  cube.shape = {2, 3, 4};
  EXPECT_FALSE(is_managed_by_layer_wise_optimizer(cube));
  ParamInfo opted_out = matrix("w", 4, 8);
  opted_out.use_muon = false;
  EXPECT_FALSE(is_managed_by_layer_wise_optimizer(opted_out));
  ParamInfo opted_in_vector = vec("b", 8);
  opted_in_vector.use_muon = true;
  EXPECT_FALSE(is_managed_by_layer_wise_optimizer(opted_in_vector));
  ParamInfo emb = matrix("emb", 100, 8);
  emb.embedding_or_output = true;
  EXPECT_FALSE(is_managed_by_layer_wise_optimizer(emb));
  ParamInfo tied = matrix("tied", 100, 8);
  tied.shared_embedding = true;
  EXPECT_FALSE(is_managed_by_layer_wise_optimizer(tied));
}

TEST(ParamInfo, NewtonSchulzCost) {
  EXPECT_DOUBLE_EQ(newton_schulz_cost(matrix("w", 100, 50)), 100.0 * 50 * 50);
  EXPECT_DOUBLE_EQ(newton_schulz_cost(matrix("w", 50, 100)), 100.0 * 50 * 50);
  ParamInfo qkv = matrix("qkv", 128, 128);
  qkv.qkv_split = {64, 32, 32};
  // Per part rows_i x 128: 128*64^2 + 2 * 128*32^2.
  EXPECT_DOUBLE_EQ(newton_schulz_cost(qkv), 128.0 * 64 * 64 + 2 * 128.0 * 32 * 32);
  EXPECT_DOUBLE_EQ(newton_schulz_cost(vec("b", 10)), 10.0);
  ParamInfo emb = matrix("emb", 1000, 16);
  emb.embedding_or_output = true;
  EXPECT_DOUBLE_EQ(newton_schulz_cost(emb), 16000.0);
}

}  // namespace
}  // namespace shardwise
