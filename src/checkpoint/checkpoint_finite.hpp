// Internal: finding NaN/inf in tensors read from a checkpoint. A checkpoint is only ever written
// from a finite training state, so a non-finite value means damage (or a file made by hand), and
// training from it would only produce NaN.
#pragma once

#include <cstdint>
#include <optional>

#include "shardwise/core/dtype.hpp"

namespace shardwise::checkpoint_detail {

// Index of the first NaN or infinite element of `count` elements of `dtype` at `data` (any
// alignment), or nullopt when all are finite. Integer dtypes and scale bytes are
// not checked.
std::optional<std::int64_t> first_non_finite(const void* data, std::int64_t count, DType dtype);

}  // namespace shardwise::checkpoint_detail
