// Shared by the tests/cuda tests: the GPU skip, random values, bitwise comparison.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "shardwise/cuda/mxfp8_cuda.hpp"

#define SW_SKIP_WITHOUT_GPU()                                          \
  if (!::shardwise::cuda::gpu_available()) {                           \
    GTEST_SKIP() << "no CUDA device: cudaGetDeviceCount() found none"; \
  }

namespace shardwise::cuda::test {

// n normal values with standard deviation `scale`.
inline std::vector<float> normal_values(std::size_t n, float scale, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

// "" when a and b hold the same bits, else where and how they first differ.
template <typename T>
std::string first_bit_difference(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size()) return "sizes differ";
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(T)) != 0) {
      return "element " + std::to_string(i) + ": " + std::to_string(a[i]) + " vs " +
             std::to_string(b[i]);
    }
  }
  return "";
}

}  // namespace shardwise::cuda::test
