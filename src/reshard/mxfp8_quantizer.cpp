#include "shardwise/reshard/mxfp8_quantizer.hpp"

namespace shardwise {
namespace {

class HostMxfp8Quantizer final : public Mxfp8Quantizer {
 public:
  Mxfp8Tensor quantize(TensorView input, std::int64_t rows, std::int64_t cols,
                       const Mxfp8Options& options) const override {
    return quantize_mxfp8(input, rows, cols, options);
  }
  void quantize_into(TensorView input, std::int64_t rows, std::int64_t cols, Mxfp8View dst,
                     std::int64_t row_offset, std::int64_t col_offset,
                     const Mxfp8Options& options) const override {
    quantize_mxfp8_into(input, rows, cols, dst, row_offset, col_offset, options);
  }
};

}  // namespace

const Mxfp8QuantizerPtr& host_mxfp8_quantizer() {
  static const Mxfp8QuantizerPtr quantizer = std::make_shared<HostMxfp8Quantizer>();
  return quantizer;
}

}  // namespace shardwise
