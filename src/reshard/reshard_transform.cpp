#include "shardwise/reshard/reshard_transform.hpp"

#include <optional>

#include "shardwise/core/error.hpp"

namespace shardwise {

WireTensor WireTensor::allocate(DType dtype, std::int64_t numel) {
  SW_CHECK(numel >= 0, "WireTensor of ", numel, " elements");
  const std::size_t bytes = static_cast<std::size_t>(numel) * dtype_size(dtype);
  // 8-byte words keep every dtype aligned.
  auto storage = std::make_shared<std::vector<std::uint64_t>>((bytes + 7) / 8);
  WireTensor t;
  t.view_ = {storage->data(), numel, dtype};
  t.owner_ = std::move(storage);
  return t;
}

WireTensor WireTensor::adopt(std::vector<std::uint8_t> bytes, DType dtype) {
  SW_CHECK(dtype_size(dtype) == 1, "WireTensor::adopt of ", dtype_name(dtype));
  auto storage = std::make_shared<std::vector<std::uint8_t>>(std::move(bytes));
  WireTensor t;
  t.view_ = {storage->data(), static_cast<std::int64_t>(storage->size()), dtype};
  t.owner_ = std::move(storage);
  return t;
}

WireTensor WireTensor::borrow(TensorView view) {
  WireTensor t;
  t.view_ = view;
  return t;
}

namespace {

// The piece itself when it is contiguous in its box (no staging needed).
std::optional<WireTensor> borrowed_piece(const ReshardSlice& slice, TensorView box) {
  const std::vector<std::int64_t> extents = slice.box.extents();
  SW_CHECK(box.numel == slice.box.numel(), "box view of ", box.numel, " elements for box ",
           to_string(slice.box));
  if (!is_contiguous_in(slice.local, extents)) return std::nullopt;
  return WireTensor::borrow(box.slice(flat_offset(slice.local, extents), slice.local.numel()));
}

}  // namespace

WireTensor wire_buffer_for(const ReshardSlice& slice, TensorView box, ReshardWorkspace& workspace) {
  if (auto piece = borrowed_piece(slice, box)) return *piece;
  const std::int64_t numel = slice.local.numel();
  return WireTensor::stage_in(
      {workspace.take(static_cast<std::size_t>(numel) * dtype_size(box.dtype)), numel, box.dtype});
}

void pack_for_wire(const ReshardSlice& slice, TensorView box, const WireTensor& wire) {
  if (!wire.staged()) return;
  copy_box(box.data, slice.box.extents(), slice.local, wire.view().data, slice.local.extents(),
           Box::whole(slice.local.extents()), dtype_size(box.dtype));
}

WireTensor WireTensor::stage_in(TensorView buffer) {
  WireTensor t;
  t.view_ = buffer;
  t.staging_ = true;
  return t;
}

WireTensor slice_for_wire(const ReshardSlice& slice, TensorView box) {
  if (auto piece = borrowed_piece(slice, box)) return *piece;
  WireTensor packed = WireTensor::allocate(box.dtype, slice.local.numel());
  pack_for_wire(slice, box, packed);
  return packed;
}

}  // namespace shardwise
