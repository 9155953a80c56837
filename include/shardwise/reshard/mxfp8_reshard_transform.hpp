// Mxfp8ReshardTransform (Megatron-Core's MXFP8ReshardTransform): writes received weights into
// persistent MXFP8 buffers whose addresses never change across refits (CUDA-graph captures stay
// valid).
//
// A destination box is viewed as a 2-D matrix [prod(extents but last), last extent]; its
// persistent buffer is an Mxfp8View of exactly that shape (any scale layout). MXFP8 blocks run
// along the last dimension, relative to the start of the destination box.
//
//  - convert_on_send = false (default, receiver-side conversion): the wire carries the param's
//    plain dtype (bf16), exactly as without a transform, so senders need no transform. The
//    receiver quantizes each received piece into its place with quantize_mxfp8_into. A piece
//    whose last-dim bounds cut a block (possible between arbitrary layouts) is completed in a
//    per-box staging copy: each such block is quantized once all of its elements arrived, so
//    the result equals quantizing the whole box whatever the piece boundaries.
//  - convert_on_send = true: the sender quantizes each piece and sends data (E4M3) + scale (E8M0)
//    as two tensors (sub-ids 0 and 1, so same-rank transfers work too); about half the bytes of
//    bf16. Both sides need the transform. Pieces must be block aligned relative to the
//    destination box: last-dim start a multiple of 32 and stop a multiple of 32 or the box end;
//    InvalidArgument naming the param and slice otherwise (raised before anything is sent).
//
// The quantization itself (both modes) goes through an Mxfp8Quantizer: the CPU codec by default,
// the GPU kernels with cuda::DeviceMxfp8Quantizer (same bits).
#pragma once

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "shardwise/core/mxfp8.hpp"
#include "shardwise/reshard/mxfp8_quantizer.hpp"
#include "shardwise/reshard/reshard_transform.hpp"

namespace shardwise {

// Param name (without the prefix) -> one view per destination box of this rank, in spec order.
using Mxfp8PersistentBuffers = std::map<std::string, std::vector<Mxfp8View>>;

class Mxfp8ReshardTransform final : public ReshardTransform {
 public:
  Mxfp8ReshardTransform(std::set<std::string> convertible_params,
                        Mxfp8PersistentBuffers persistent_buffers,
                        std::string buffer_key_prefix = "", bool convert_on_send = false,
                        Mxfp8Options options = {},
                        Mxfp8QuantizerPtr quantizer = host_mxfp8_quantizer());

  bool should_transform(const std::string& param) const override;
  std::vector<WireTensor> prepare_send(const std::string& param, const ReshardSlice& src_slice,
                                       TensorView src_box) override;
  std::vector<WireTensor> prepare_recv(const std::string& param,
                                       const ReshardSlice& dst_slice) override;
  void finalize_recv(const std::string& param, const ReshardSlice& dst_slice,
                     std::vector<WireTensor>& buffers) override;

  bool convert_on_send() const { return convert_on_send_; }

 private:
  // Elements of blocks that arrived in several pieces, until each block is complete.
  struct PartialBlocks {
    std::vector<std::uint64_t> staging;  // the box in the wire dtype (only cut blocks are used)
    std::vector<std::uint8_t> arrived;   // elements received per (row, block)
  };

  const Mxfp8View& target(const std::string& param, const ReshardSlice& slice) const;
  void quantize_received(const std::string& param, const ReshardSlice& slice, const Mxfp8View& dst,
                         TensorView piece);
  void copy_quantized(const ReshardSlice& slice, const Mxfp8View& dst,
                      const std::vector<WireTensor>& buffers) const;

  std::set<std::string> convertible_;
  Mxfp8PersistentBuffers buffers_;
  std::string prefix_;
  bool convert_on_send_;
  Mxfp8Options options_;
  Mxfp8QuantizerPtr quantizer_;
  std::map<std::pair<std::string, int>, PartialBlocks> partial_;
};

}  // namespace shardwise
