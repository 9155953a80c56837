// Owned device memory that only grows (a workspace reused across calls allocates once for the
// largest call), and the host <-> device copies tests and benchmarks need. No CUDA headers.
#pragma once

#include <cstddef>
#include <vector>

namespace shardwise::cuda {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t bytes) { reserve(bytes); }
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  // At least `bytes` of device memory afterwards. Growing frees the old allocation first, so the
  // contents are lost (workspaces only). Throws CudaError when cudaMalloc fails.
  void reserve(std::size_t bytes);

  void* data() const { return data_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  std::size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

// Synchronous copies (cudaMemcpy); throw CudaError naming the call.
void copy_to_device(void* device, const void* host, std::size_t bytes);
void copy_to_host(void* host, const void* device, std::size_t bytes);

// A device buffer holding `values` (tests and benchmarks).
template <typename T>
DeviceBuffer to_device(const std::vector<T>& values) {
  DeviceBuffer buffer(values.size() * sizeof(T));
  copy_to_device(buffer.data(), values.data(), values.size() * sizeof(T));
  return buffer;
}

template <typename T>
std::vector<T> to_host(const DeviceBuffer& buffer, std::size_t count) {
  std::vector<T> values(count);
  copy_to_host(values.data(), buffer.data(), count * sizeof(T));
  return values;
}

// cudaStreamSynchronize(stream) (null = the default stream); throws CudaError on failure, which
// is where an asynchronous kernel error surfaces.
void synchronize(void* stream = nullptr);

}  // namespace shardwise::cuda
