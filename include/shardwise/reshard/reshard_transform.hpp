// ReshardTransform: hooks that replace the default send / receive / write-back of a transfer
// (Megatron-Core's ReshardTransform). For every op whose param should_transform(), the executor
// sends the tensors prepare_send returns and receives into the buffers prepare_recv returns (the
// two lists must have the same length and matching sizes), then calls finalize_recv. Tensor i of an
// op travels as sub-id i (its own MPI tag, and its own slot in same-rank copies), so an op may
// carry several tensors (e.g. MXFP8 data + scale) even when sender and receiver are the same rank.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "shardwise/core/tensor_view.hpp"
#include "shardwise/reshard/box.hpp"
#include "shardwise/reshard/reshard_workspace.hpp"

namespace shardwise {

// Where one transfer sits, from the point of view of the rank running a hook.
struct ReshardSlice {
  DType dtype = DType::kBFloat16;          // the param's (wire) dtype
  std::vector<std::int64_t> global_shape;  // of the whole param
  Box global;                              // the piece, global coordinates
  Box box;                                 // this rank's box holding the piece (global coords)
  int box_index = 0;                       // its index in this rank's side of the spec
  Box local;                               // the piece inside `box` (box-local coordinates)
  Box peer_box;                            // the peer's box (global coordinates)
  std::int64_t task_id = 0;
};

// A tensor on the wire: owns its storage, or borrows memory owned elsewhere (a slice of the
// source, or the destination itself for zero-copy receives).
class WireTensor {
 public:
  WireTensor() = default;
  static WireTensor allocate(DType dtype, std::int64_t numel);
  // A staging buffer held elsewhere (a ReshardWorkspace): borrowed, but staged() like storage
  // of its own.
  static WireTensor stage_in(TensorView buffer);
  static WireTensor adopt(std::vector<std::uint8_t> bytes, DType dtype);  // 1-byte dtypes
  static WireTensor borrow(TensorView view);

  TensorView view() const { return view_; }
  bool owns_storage() const { return owner_ != nullptr; }
  // A copy of the piece (packed before sending, unpacked after receiving), not the piece itself.
  bool staged() const { return owner_ != nullptr || staging_; }

 private:
  TensorView view_;
  std::shared_ptr<void> owner_;
  bool staging_ = false;
};

class ReshardTransform {
 public:
  virtual ~ReshardTransform() = default;

  virtual bool should_transform(const std::string& param) const = 0;
  // Tensors to send for the piece src_slice.local of `src_box` (the whole local box, row-major,
  // in the wire dtype; quantized sources are already dequantized, see ensure_sendable).
  virtual std::vector<WireTensor> prepare_send(const std::string& param,
                                               const ReshardSlice& src_slice,
                                               TensorView src_box) = 0;
  // Receive buffers for the piece dst_slice.local; as many as prepare_send returns.
  virtual std::vector<WireTensor> prepare_recv(const std::string& param,
                                               const ReshardSlice& dst_slice) = 0;
  // Writes the received buffers to their final destination.
  virtual void finalize_recv(const std::string& param, const ReshardSlice& dst_slice,
                             std::vector<WireTensor>& buffers) = 0;
};

// The piece `slice.local` of the row-major box `box` (extents slice.box), as one contiguous
// tensor: borrowed when the piece is contiguous in the box, packed into a new buffer otherwise.
WireTensor slice_for_wire(const ReshardSlice& slice, TensorView box);
// slice_for_wire in two steps, so the executor can pack a send right before posting it and receive
// into a staging buffer without filling it first: the borrowed piece, or an unfilled staging
// buffer of its size from `workspace`...
WireTensor wire_buffer_for(const ReshardSlice& slice, TensorView box, ReshardWorkspace& workspace);
// ...and, when `wire` is staged, the piece packed into it (nothing when it borrows the piece).
void pack_for_wire(const ReshardSlice& slice, TensorView box, const WireTensor& wire);

}  // namespace shardwise
