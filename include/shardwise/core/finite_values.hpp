// Where a weight array stops being finite: checkpoints are refused when it does (train --load,
// generate, refit --checkpoint), rather than running a model that can only print garbage.
#pragma once

#include <cmath>
#include <cstdint>

namespace shardwise {

// Index of the first NaN or infinite element of values[0, n), or n when every one is finite.
inline std::int64_t first_nonfinite(const float* values, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(values[i])) return i;
  }
  return n;
}

}  // namespace shardwise
