// Inputs shared by the optimizer tests: refilling grads in place and random vectors.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "reference_math.hpp"

namespace shardwise::optim::testing {

// Grads are views held by the optimizer: refill them in place, never reassign the vector.
inline void overwrite(std::vector<float>& dst, const std::vector<float>& src) {
  ASSERT_EQ(dst.size(), src.size());
  std::copy(src.begin(), src.end(), dst.begin());
}

// n Gaussian floats (seeded, times scale).
inline std::vector<float> random_vector(std::int64_t n, std::uint64_t seed, double scale = 1.0) {
  return to_floats(random_gaussian(1, n, seed, scale));
}

}  // namespace shardwise::optim::testing
