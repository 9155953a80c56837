#include "shardwise/cuda/device_buffer.hpp"

#include <utility>

#include "cuda_status.hpp"

namespace shardwise::cuda {

using detail::check_cuda;

DeviceBuffer::~DeviceBuffer() {
  if (data_ != nullptr) cudaFree(data_);  // a destructor cannot throw; nothing to recover
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) cudaFree(data_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void DeviceBuffer::reserve(std::size_t bytes) {
  if (bytes <= bytes_) return;
  if (data_ != nullptr) {
    // cudaFree waits for work already queued on the device, so no kernel still reads the old
    // memory.
    check_cuda(cudaFree(data_), "cudaFree");
    data_ = nullptr;
    bytes_ = 0;
  }
  check_cuda(cudaMalloc(&data_, bytes), "cudaMalloc");
  bytes_ = bytes;
}

void copy_to_device(void* device, const void* host, std::size_t bytes) {
  if (bytes == 0) return;
  check_cuda(cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice), "cudaMemcpy host to device");
}

void copy_to_host(void* host, const void* device, std::size_t bytes) {
  if (bytes == 0) return;
  check_cuda(cudaMemcpy(host, device, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy device to host");
}

void synchronize(void* stream) {
  check_cuda(cudaStreamSynchronize(detail::as_stream(stream)), "cudaStreamSynchronize");
}

}  // namespace shardwise::cuda
