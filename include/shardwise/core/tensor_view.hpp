// A non-owning view of a contiguous run of elements of one dtype: what the comm, DDP and
// optimizer layers pass around (params and grads are views into bucket buffers). The bytes are in
// host memory, or in the memory of one CUDA device (`device` >= 0): code that reads or writes
// elements itself must check on_device() and refuse (or stage) device views.
#pragma once

#include <cstddef>
#include <cstdint>

#include "shardwise/core/dtype.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise {

struct TensorView {
  void* data = nullptr;
  std::int64_t numel = 0;
  DType dtype = DType::kFloat32;
  int device = kHostMemory;  // kHostMemory, or the CUDA device index the bytes live on

  static constexpr int kHostMemory = -1;
  bool on_device() const { return device != kHostMemory; }
  std::size_t nbytes() const { return static_cast<std::size_t>(numel) * dtype_size(dtype); }
  // Elements [offset, offset + count) of this view.
  TensorView slice(std::int64_t offset, std::int64_t count) const {
    SW_CHECK(offset >= 0 && count >= 0 && offset + count <= numel, "slice [", offset, ", ",
             offset + count, ") of a view of ", numel, " elements");
    return {static_cast<std::byte*>(data) + static_cast<std::size_t>(offset) * dtype_size(dtype),
            count, dtype, device};
  }
  template <typename T>
  T* as() const {
    SW_CHECK(sizeof(T) == dtype_size(dtype), "view of ", dtype_name(dtype), " read as ", sizeof(T),
             "-byte elements");
    return static_cast<T*>(data);
  }
};

// InvalidArgument naming `what` when `view` lies in CUDA device memory: for host code that reads
// or writes the elements itself.
inline void require_host_view(const TensorView& view, const char* what) {
  SW_REQUIRE(!view.on_device(), InvalidArgument, what, " is in the memory of CUDA device ",
             view.device, "; this call reads and writes host memory");
}

}  // namespace shardwise
