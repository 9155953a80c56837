#include "shardwise/optim/grad_stats.hpp"

#include <cstddef>

namespace shardwise::optim {

double sum_of_squares(std::span<const float> values) {
  // Eight independent accumulators: keeps the FP adds pipelined (and vectorisable) without
  // reassociation flags; the summation order is fixed, so results are deterministic.
  constexpr std::size_t kLanes = 8;
  double lanes[kLanes] = {};
  const std::size_t n = values.size();
  const std::size_t main = n - n % kLanes;
  const float* v = values.data();
  for (std::size_t i = 0; i < main; i += kLanes) {
    for (std::size_t l = 0; l < kLanes; ++l) {
      const double x = v[i + l];
      lanes[l] += x * x;
    }
  }
  for (std::size_t i = main; i < n; ++i) {
    const double x = v[i];
    lanes[i - main] += x * x;
  }
  double total = 0.0;
  for (double lane : lanes) total += lane;
  return total;
}

std::int64_t count_zeros(std::span<const float> values) {
  std::int64_t zeros = 0;
  for (float x : values) zeros += (x == 0.0f) ? 1 : 0;
  return zeros;
}

void scale_in_place(std::span<float> values, float coeff) {
  for (float& x : values) x *= coeff;
}

}  // namespace shardwise::optim
