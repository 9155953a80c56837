#include "shardwise/cuda/mxfp8_reshard_cuda.hpp"

#include <cstring>

#include "shardwise/core/error.hpp"
#include "shardwise/cuda/device_memory.hpp"
#include "shardwise/cuda/mxfp8_cuda.hpp"

namespace shardwise::cuda {

DeviceMxfp8Quantizer::DeviceMxfp8Quantizer(int device) : device_(device) { use_device(device); }

Mxfp8Tensor DeviceMxfp8Quantizer::quantize(TensorView input, std::int64_t rows, std::int64_t cols,
                                           const Mxfp8Options& options) const {
  use_device(device_);
  return quantize_mxfp8_cuda(input, rows, cols, options);
}

namespace {

// quantize_mxfp8_into's conditions on the rectangle.
void require_whole_blocks_inside(std::int64_t rows, std::int64_t cols, const Mxfp8View& dst,
                                 std::int64_t row_offset, std::int64_t col_offset) {
  SW_REQUIRE(rows >= 0 && cols >= 0 && row_offset >= 0 && col_offset >= 0 &&
                 row_offset + rows <= dst.rows && col_offset + cols <= dst.cols,
             ShapeError, "quantize_mxfp8_into: [", rows, ", ", cols, "] at (", row_offset, ", ",
             col_offset, ") does not fit a [", dst.rows, ", ", dst.cols, "] destination");
  SW_REQUIRE(col_offset % kMxfp8BlockSize == 0 &&
                 (cols % kMxfp8BlockSize == 0 || col_offset + cols == dst.cols),
             InvalidArgument, "quantize_mxfp8_into: columns [", col_offset, ", ", col_offset + cols,
             ") of ", dst.cols, " are not whole blocks of ", kMxfp8BlockSize);
}

}  // namespace

void place_quantized_rectangle(const Mxfp8Tensor& q, Mxfp8View dst, std::int64_t row_offset,
                               std::int64_t col_offset) {
  const std::int64_t rows = q.rows, cols = q.cols;
  require_whole_blocks_inside(rows, cols, dst, row_offset, col_offset);
  SW_REQUIRE(q.layout == Mxfp8ScaleLayout::kRowMajor, InvalidArgument,
             "place_quantized_rectangle: the quantized rectangle must have row-major scales");
  const std::int64_t blocks = (cols + kMxfp8BlockSize - 1) / kMxfp8BlockSize;
  SW_REQUIRE(static_cast<std::int64_t>(q.data.size()) == rows * cols &&
                 static_cast<std::int64_t>(q.scale.size()) == rows * blocks,
             ShapeError, "place_quantized_rectangle: ", q.data.size(), " + ", q.scale.size(),
             " bytes do not hold a [", rows, ", ", cols, "] rectangle");
  const std::int64_t dst_blocks = (dst.cols + kMxfp8BlockSize - 1) / kMxfp8BlockSize;
  const std::int64_t first_block = col_offset / kMxfp8BlockSize;
  for (std::int64_t r = 0; r < rows; ++r) {
    std::memcpy(dst.data.data() + (row_offset + r) * dst.cols + col_offset,
                q.data.data() + r * cols, static_cast<std::size_t>(cols));
    for (std::int64_t j = 0; j < blocks; ++j) {
      dst.scale[static_cast<std::size_t>(
          mxfp8_scale_offset(dst.layout, row_offset + r, first_block + j, dst_blocks))] =
          q.scale[static_cast<std::size_t>(r * blocks + j)];
    }
  }
}

void DeviceMxfp8Quantizer::quantize_into(TensorView input, std::int64_t rows, std::int64_t cols,
                                         Mxfp8View dst, std::int64_t row_offset,
                                         std::int64_t col_offset,
                                         const Mxfp8Options& options) const {
  require_whole_blocks_inside(rows, cols, dst, row_offset, col_offset);  // before the kernel
  // A separately quantized rectangle has the destination's blocks: it starts on a block boundary
  // and ends on one or at the destination's last (partial) block.
  Mxfp8Options row_major = options;
  row_major.layout = Mxfp8ScaleLayout::kRowMajor;
  place_quantized_rectangle(quantize(input, rows, cols, row_major), dst, row_offset, col_offset);
}

}  // namespace shardwise::cuda
