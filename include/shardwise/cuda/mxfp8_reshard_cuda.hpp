// MXFP8 refit quantization on the GPU: an Mxfp8Quantizer for Mxfp8ReshardTransform (both the
// sender's convert_on_send quantization and the receiver-side quantization into the persistent
// buffers) that runs the MXFP8 kernels of mxfp8_cuda.hpp, bit-exact with the CPU codec. The
// reshard executor moves host memory, so each call stages the piece through device memory: copy
// in, quantize on `device`, copy the E4M3 bytes and E8M0 scales back and place them into the
// destination's sub-rectangle in its scale layout. No CUDA headers.
#pragma once

#include "shardwise/reshard/mxfp8_quantizer.hpp"

namespace shardwise::cuda {

class DeviceMxfp8Quantizer final : public Mxfp8Quantizer {
 public:
  // InvalidArgument naming the device when it does not exist.
  explicit DeviceMxfp8Quantizer(int device);
  int device() const { return device_; }

  Mxfp8Tensor quantize(TensorView input, std::int64_t rows, std::int64_t cols,
                       const Mxfp8Options& options) const override;
  // quantize_mxfp8_into's checks and errors (block-aligned col_offset, cols a whole number of
  // blocks unless the rectangle ends at dst.cols, the rectangle inside dst).
  void quantize_into(TensorView input, std::int64_t rows, std::int64_t cols, Mxfp8View dst,
                     std::int64_t row_offset, std::int64_t col_offset,
                     const Mxfp8Options& options) const override;

 private:
  int device_;
};

// The host half of quantize_into: copies `q` (row-major scales, quantized from a rectangle that
// starts on a block boundary and ends on one or at dst's last block) into dst's sub-rectangle at
// (row_offset, col_offset), scales in dst.layout. The same arguments as quantize_mxfp8_into give
// the same bytes; ShapeError / InvalidArgument when the rectangle does not fit or is not whole
// blocks. Runs on the CPU (tests/cuda/mxfp8_reshard_placement_test.cpp checks it without a GPU).
void place_quantized_rectangle(const Mxfp8Tensor& q, Mxfp8View dst, std::int64_t row_offset,
                               std::int64_t col_offset);

}  // namespace shardwise::cuda
