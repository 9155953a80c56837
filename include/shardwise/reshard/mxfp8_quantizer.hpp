// Where Mxfp8ReshardTransform's quantization runs: the CPU codec (core/mxfp8.hpp) by default, or
// another implementation with the same bits (the CUDA layer's cuda::DeviceMxfp8Quantizer runs
// the GPU kernels). Inputs and outputs are host memory, as the reshard executor moves host
// memory; an implementation may stage them elsewhere.
#pragma once

#include <cstdint>
#include <memory>

#include "shardwise/core/mxfp8.hpp"
#include "shardwise/core/tensor_view.hpp"

namespace shardwise {

class Mxfp8Quantizer {
 public:
  virtual ~Mxfp8Quantizer() = default;
  // quantize_mxfp8's contract.
  virtual Mxfp8Tensor quantize(TensorView input, std::int64_t rows, std::int64_t cols,
                               const Mxfp8Options& options) const = 0;
  // quantize_mxfp8_into's contract.
  virtual void quantize_into(TensorView input, std::int64_t rows, std::int64_t cols, Mxfp8View dst,
                             std::int64_t row_offset, std::int64_t col_offset,
                             const Mxfp8Options& options) const = 0;
};

using Mxfp8QuantizerPtr = std::shared_ptr<const Mxfp8Quantizer>;

// The CPU codec (shared, stateless).
const Mxfp8QuantizerPtr& host_mxfp8_quantizer();

}  // namespace shardwise
