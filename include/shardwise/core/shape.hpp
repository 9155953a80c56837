// Shapes of row-major tensors.
#pragma once

#include <cstdint>
#include <vector>

namespace shardwise {

// Elements of a tensor of `shape` (1 for a scalar). Callers pass validated shapes: the product
// of the dimensions fits int64 (the safetensors reader checks it on untrusted input).
inline std::int64_t shape_numel(const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (const std::int64_t d : shape) n *= d;
  return n;
}

}  // namespace shardwise
