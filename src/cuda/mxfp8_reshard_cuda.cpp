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

void DeviceMxfp8Quantizer::quantize_into(TensorView input, std::int64_t rows, std::int64_t cols,
                                         Mxfp8View dst, std::int64_t row_offset,
                                         std::int64_t col_offset,
                                         const Mxfp8Options& options) const {
  SW_REQUIRE(row_offset >= 0 && col_offset >= 0 && rows >= 0 && cols >= 0 &&
                 row_offset + rows <= dst.rows && col_offset + cols <= dst.cols,
             ShapeError, "quantize_mxfp8_into: [", rows, ", ", cols, "] at (", row_offset, ", ",
             col_offset, ") does not fit a [", dst.rows, ", ", dst.cols, "] destination");
  SW_REQUIRE(col_offset % kMxfp8BlockSize == 0 &&
                 (cols % kMxfp8BlockSize == 0 || col_offset + cols == dst.cols),
             InvalidArgument, "quantize_mxfp8_into: columns [", col_offset, ", ", col_offset + cols,
             ") of ", dst.cols, " are not whole blocks of ", kMxfp8BlockSize);
  // A separately quantized rectangle has the destination's blocks: it starts on a block boundary
  // and ends on one or at the destination's last (partial) block.
  Mxfp8Options row_major = options;
  row_major.layout = Mxfp8ScaleLayout::kRowMajor;
  const Mxfp8Tensor q = quantize(input, rows, cols, row_major);
  const std::int64_t blocks = (cols + kMxfp8BlockSize - 1) / kMxfp8BlockSize;
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

}  // namespace shardwise::cuda
