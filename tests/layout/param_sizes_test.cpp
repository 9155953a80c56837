// Element counts past kMaxModelNumel are refused (a product that overflows int64 used to wrap to
// a small or empty range), per param and for the model as a whole, also by the layout itself.
#include "shardwise/layout/param_sizes.hpp"

#include <gtest/gtest.h>

#include <string>

#include "layout/layout_test_models.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/layout/layout_algorithms.hpp"

namespace shardwise {
namespace {

std::string numel_error(std::vector<std::int64_t> shape) {
  ParamInfo p;
  p.name = "huge";
  p.shape = std::move(shape);
  try {
    p.numel();
  } catch (const ShapeError& e) {
    return e.what();
  }
  return "";
}

TEST(ParamSizes, ProductsPastTheLimitAreRefusedNotWrapped) {
  // 2^65 elements: the unchecked product was 0.
  EXPECT_NE(numel_error({std::int64_t{1} << 33, std::int64_t{1} << 32})
                .find("param huge: shape [8589934592, 4294967296] has more than 1125899906842624"),
            std::string::npos);
  EXPECT_NE(numel_error({3, std::int64_t{1} << 62, std::int64_t{1} << 62}), "");
  EXPECT_NE(numel_error({std::int64_t{1} << 26, std::int64_t{1} << 25}), "");  // 2^51
  EXPECT_EQ(numel_error({std::int64_t{1} << 25, std::int64_t{1} << 25}), "");  // 2^50: the limit
  // A long shape is cut in the message.
  const std::string long_shape = numel_error(std::vector<std::int64_t>(100, 2));
  EXPECT_NE(long_shape.find(", ... (100 dimensions)]"), std::string::npos) << long_shape;
  EXPECT_LT(long_shape.size(), 200u);
}

TEST(ParamSizes, TheModelTotalIsLimitedToo) {
  ParamList params;
  for (int i = 0; i < 4; ++i)
    params.push_back(layout_test::matrix(str_cat("p", i), 1 << 24, 1 << 24));
  EXPECT_NO_THROW(validate_param_sizes(params));  // 4 x 2^48 = 2^50
  params.push_back(layout_test::vec("bias", 1));
  EXPECT_THROW(validate_param_sizes(params), ShapeError);
  LayoutOptions options;
  options.data_parallel_size = 2;
  EXPECT_THROW(compute_full_param_layout(params, options), ShapeError);
}

}  // namespace
}  // namespace shardwise
