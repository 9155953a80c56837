// The host half of cuda::DeviceMxfp8Quantizer::quantize_into, without a GPU: a rectangle quantized
// on its own (row-major scales) and placed by place_quantized_rectangle must give the bytes
// quantize_mxfp8_into writes for the same rectangle, in both scale layouts and both rules,
// including a partial last block and a rectangle crossing the swizzled layout's 128-row tiles.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "cuda_test_support.hpp"
#include "shardwise/core/mxfp8.hpp"
#include "shardwise/cuda/mxfp8_reshard_cuda.hpp"

namespace shardwise::cuda {
namespace {

struct PlacedRectangle {
  std::int64_t row_offset, col_offset, rows, cols;
};

TEST(Mxfp8RectanglePlacement, MatchesQuantizeIntoOnTheCpu) {
  constexpr std::int64_t kRows = 150, kCols = 80;  // 80: the last block has 16 columns
  const PlacedRectangle rectangles[] = {
      {3, 32, 10, 32}, {0, 64, 5, 16}, {120, 0, 30, 80}, {7, 0, 1, 64}};
  for (Mxfp8ScaleLayout layout : {Mxfp8ScaleLayout::kRowMajor, Mxfp8ScaleLayout::kSwizzled128x4}) {
    for (Mxfp8ScaleRule rule : {Mxfp8ScaleRule::kCeil, Mxfp8ScaleRule::kFloor}) {
      Mxfp8Tensor expected = Mxfp8Tensor::allocate(kRows, kCols, layout);
      Mxfp8Tensor placed = Mxfp8Tensor::allocate(kRows, kCols, layout);
      std::uint32_t seed = 40;
      for (const PlacedRectangle& r : rectangles) {
        std::vector<float> input = test::normal_values(static_cast<std::size_t>(r.rows * r.cols),
                                                       static_cast<float>(seed % 7 + 1), seed);
        ++seed;
        const TensorView view{input.data(), r.rows * r.cols, DType::kFloat32};
        Mxfp8Options options;
        options.rule = rule;
        quantize_mxfp8_into(view, r.rows, r.cols, expected.view(), r.row_offset, r.col_offset,
                            options);
        const Mxfp8Tensor alone = quantize_mxfp8(view, r.rows, r.cols, options);  // row-major
        place_quantized_rectangle(alone, placed.view(), r.row_offset, r.col_offset);
      }
      EXPECT_EQ(test::first_bit_difference(placed.data, expected.data), "");
      EXPECT_EQ(test::first_bit_difference(placed.scale, expected.scale), "");
    }
  }
}

TEST(Mxfp8RectanglePlacement, RectanglesThatCutBlocksOrOverhangAreRefused) {
  Mxfp8Tensor dst = Mxfp8Tensor::allocate(8, 80);
  std::vector<float> input(4 * 32, 1.0f);
  const Mxfp8Tensor q = quantize_mxfp8({input.data(), 4 * 32, DType::kFloat32}, 4, 32);
  EXPECT_THROW(place_quantized_rectangle(q, dst.view(), 0, 16), InvalidArgument);
  EXPECT_THROW(place_quantized_rectangle(q, dst.view(), 6, 0), ShapeError);
  EXPECT_THROW(place_quantized_rectangle(q, dst.view(), 0, 64), ShapeError);
}

}  // namespace
}  // namespace shardwise::cuda
