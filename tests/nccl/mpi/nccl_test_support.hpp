// Shared by the NCCL group tests: which device a rank uses, the skips, device arrays filled from
// and read back into floats, and values whose sums are exact in fp32, bf16 and fp16 (so every
// reduction order gives the same bits and results compare exactly with a host reference).
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "shardwise/comm/mpi_process_group.hpp"
#include "shardwise/core/float_convert.hpp"
#include "shardwise/nccl/gpu_ownership.hpp"
#include "shardwise/nccl/nccl_process_group.hpp"

namespace shardwise::nccl_test {

inline int visible_gpus() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess ? count : 0;
}

// Ranks of one machine take GPUs round robin; two ranks share one when there are too few.
inline int device_of_rank(int rank) {
  const int gpus = visible_gpus();
  return gpus > 0 ? rank % gpus : 0;
}

// Skips (on every rank alike) unless each rank of `world` has a GPU of its own.
#define SW_SKIP_WITHOUT_OWN_GPUS(world)                                                          \
  if (::shardwise::nccl_test::visible_gpus() == 0) {                                             \
    GTEST_SKIP() << "no CUDA device: cudaGetDeviceCount() found none";                           \
  }                                                                                              \
  if (!::shardwise::every_rank_has_own_gpu(                                                      \
          world, ::shardwise::nccl_test::device_of_rank((world)->rank()))) {                     \
    GTEST_SKIP() << (world)->size() << " ranks share " << ::shardwise::nccl_test::visible_gpus() \
                 << " GPU(s); NCCL needs one GPU per rank";                                      \
  }

#define SW_CUDA_OK(call) ASSERT_EQ((call), cudaSuccess) << #call

// A small exact value: a multiple of 1/4 in [-8, 8], different for every rank, index and seed.
inline float exact_value(int rank, std::int64_t i, int seed) {
  const auto k = (i * 7 + rank * 13 + seed * 29) % 65;
  return static_cast<float>(k - 32) / 4.0f;
}

inline std::vector<float> exact_values(int rank, std::int64_t n, int seed) {
  std::vector<float> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = exact_value(rank, i, seed);
  return v;
}

// `n` elements of `dtype` on `device`.
class DeviceArray {
 public:
  DeviceArray(DType dtype, std::int64_t n, int device) : dtype_(dtype), n_(n), device_(device) {
    cudaSetDevice(device);
    if (cudaMalloc(&data_, std::max<std::size_t>(1, bytes())) != cudaSuccess) data_ = nullptr;
  }
  ~DeviceArray() {
    if (data_ != nullptr) cudaFree(data_);
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  std::size_t bytes() const { return static_cast<std::size_t>(n_) * dtype_size(dtype_); }
  TensorView view() const { return {data_, n_, dtype_, device_}; }
  bool ok() const { return data_ != nullptr; }

  // Rounds `values` to the dtype and copies them in.
  void upload(const std::vector<float>& values) {
    const std::vector<std::uint8_t> raw = encode(values);
    cudaMemcpy(data_, raw.data(), raw.size(), cudaMemcpyHostToDevice);
  }
  std::vector<float> download() const {
    std::vector<std::uint8_t> raw(bytes());
    cudaDeviceSynchronize();
    cudaMemcpy(raw.data(), data_, raw.size(), cudaMemcpyDeviceToHost);
    return decode(raw);
  }

  std::vector<std::uint8_t> encode(const std::vector<float>& values) const {
    std::vector<std::uint8_t> raw(values.size() * dtype_size(dtype_));
    for (std::size_t i = 0; i < values.size(); ++i) {
      if (dtype_ == DType::kFloat32) {
        std::memcpy(raw.data() + 4 * i, &values[i], 4);
      } else {
        const std::uint16_t bits =
            dtype_ == DType::kBFloat16 ? float_to_bf16(values[i]) : float_to_fp16(values[i]);
        std::memcpy(raw.data() + 2 * i, &bits, 2);
      }
    }
    return raw;
  }
  std::vector<float> decode(const std::vector<std::uint8_t>& raw) const {
    std::vector<float> values(raw.size() / dtype_size(dtype_));
    for (std::size_t i = 0; i < values.size(); ++i) {
      if (dtype_ == DType::kFloat32) {
        std::memcpy(&values[i], raw.data() + 4 * i, 4);
      } else {
        std::uint16_t bits = 0;
        std::memcpy(&bits, raw.data() + 2 * i, 2);
        values[i] = dtype_ == DType::kBFloat16 ? bf16_to_float(bits) : fp16_to_float(bits);
      }
    }
    return values;
  }

 private:
  DType dtype_;
  std::int64_t n_;
  int device_;
  void* data_ = nullptr;
};

}  // namespace shardwise::nccl_test
