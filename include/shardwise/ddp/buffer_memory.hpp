// Where the param and grad buffers of DistributedDataParallel live, and the few element-wise
// operations DDP itself runs on them (zeroing grads, scaling a bucket before its collective).
// Host memory is the default; the CUDA layer supplies device memory (cuda::DeviceBufferMemory).
// Layout, bucketing, dispatch order and shard ownership do not depend on it.
#pragma once

#include <cstddef>
#include <memory>

#include "shardwise/comm/process_group.hpp"
#include "shardwise/core/tensor_view.hpp"

namespace shardwise {

class BufferMemory {
 public:
  virtual ~BufferMemory() = default;
  // TensorView::kHostMemory or the CUDA device the buffers live on (their views carry it).
  virtual int device() const = 0;
  // `nbytes` zeroed bytes, 64-byte aligned or better, that never move while the pointer lives.
  virtual std::shared_ptr<std::byte> allocate_zeroed(std::size_t nbytes) const = 0;
  virtual void zero(TensorView view) const = 0;
  // view *= factor in the view's dtype (fp32, bf16, fp16); InvalidArgument for other dtypes.
  virtual void scale(TensorView view, double factor) const = 0;
};

using BufferMemoryPtr = std::shared_ptr<const BufferMemory>;

// Host memory (shared, stateless).
const BufferMemoryPtr& host_buffer_memory();

// Host memory allocated as symmetric memory of `group` (shardwise/comm/symmetric_memory.hpp):
// the group's reduce-scatters and all-gathers on it run in place. Each allocate_zeroed is
// collective over the group (every rank, same order, same size).
BufferMemoryPtr symmetric_host_buffer_memory(ProcessGroupPtr group);

}  // namespace shardwise
