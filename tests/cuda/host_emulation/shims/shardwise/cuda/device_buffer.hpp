// Host stand-in for include/shardwise/cuda/device_buffer.hpp: grow-only host memory, filled with
// NaN when it grows so that reading workspace nobody wrote shows in the results.
#pragma once

#include <cstddef>
#include <cstring>
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

inline void copy_to_device(void* device, const void* host, std::size_t bytes) {
  std::memcpy(device, host, bytes);
}
inline void copy_to_host(void* host, const void* device, std::size_t bytes) {
  std::memcpy(host, device, bytes);
}
template <typename T>
DeviceBuffer to_device(const std::vector<T>& values) {
  DeviceBuffer buffer;
  buffer.reserve(values.size() * sizeof(T));
  copy_to_device(buffer.data(), values.data(), values.size() * sizeof(T));
  return buffer;
}
inline void synchronize(void* = nullptr) {}

}  // namespace shardwise::cuda
