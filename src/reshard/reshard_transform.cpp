#include "shardwise/reshard/reshard_transform.hpp"

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

WireTensor WireTensor::allocate_for_overwrite(DType dtype, std::int64_t numel) {
  SW_CHECK(numel >= 0, "WireTensor of ", numel, " elements");
  const std::size_t bytes = static_cast<std::size_t>(numel) * dtype_size(dtype);
  std::shared_ptr<std::uint64_t[]> storage =
      std::make_shared_for_overwrite<std::uint64_t[]>((bytes + 7) / 8);
  WireTensor t;
  t.view_ = {storage.get(), numel, dtype};
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

WireTensor wire_buffer_for(const ReshardSlice& slice, TensorView box) {
  const std::vector<std::int64_t> extents = slice.box.extents();
  SW_CHECK(box.numel == slice.box.numel(), "box view of ", box.numel, " elements for box ",
           to_string(slice.box));
  if (is_contiguous_in(slice.local, extents)) {
    return WireTensor::borrow(box.slice(flat_offset(slice.local, extents), slice.local.numel()));
  }
  return WireTensor::allocate_for_overwrite(box.dtype, slice.local.numel());
}

void pack_for_wire(const ReshardSlice& slice, TensorView box, const WireTensor& wire) {
  if (!wire.owns_storage()) return;
  copy_box(box.data, slice.box.extents(), slice.local, wire.view().data, slice.local.extents(),
           Box::whole(slice.local.extents()), dtype_size(box.dtype));
}

WireTensor slice_for_wire(const ReshardSlice& slice, TensorView box) {
  WireTensor wire = wire_buffer_for(slice, box);
  pack_for_wire(slice, box, wire);
  return wire;
}

}  // namespace shardwise
