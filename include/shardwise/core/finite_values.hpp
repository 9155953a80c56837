// Where a weight array stops being finite: checkpoints are refused when it does (train --load,
// generate, refit --checkpoint), rather than running a model that can only print garbage.
#pragma once

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string_view>

#include "shardwise/core/error.hpp"
#include "shardwise/core/message_text.hpp"

namespace shardwise {

// Index of the first NaN or infinite element of values[0, n), or n when every one is finite.
inline std::int64_t first_nonfinite(const float* values, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(values[i])) return i;
  }
  return n;
}

// FormatError naming the file, the tensor and the element unless values[0, n) are all finite:
// the one message of every command that reads a checkpoint's weights to run them.
inline void require_finite_tensor(const float* values, std::int64_t n,
                                  const std::filesystem::path& file, std::string_view tensor) {
  const std::int64_t bad = first_nonfinite(values, n);
  SW_REQUIRE(bad == n, FormatError, quoted(file), ": tensor '", printable(tensor), "' element ",
             bad, " is ", bad < n ? values[bad] : 0.0f, ": a checkpoint's weights must be finite");
}

}  // namespace shardwise
