// Host stand-in for include/shardwise/cuda/device_buffer.hpp: grow-only host memory, filled with
// NaN when it grows so that reading workspace nobody wrote shows in the results.
#pragma once

#include <cstddef>
#include <limits>
#include <utility>
#include <vector>

namespace shardwise::cuda {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  void reserve(std::size_t bytes) {
    if (bytes <= storage_.size() * sizeof(float)) return;
    storage_.assign((bytes + sizeof(float) - 1) / sizeof(float),
                    std::numeric_limits<float>::quiet_NaN());
  }
  void* data() const { return const_cast<float*>(storage_.data()); }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data());
  }
  std::size_t bytes() const { return storage_.size() * sizeof(float); }

 private:
  std::vector<float> storage_;
};

}  // namespace shardwise::cuda
