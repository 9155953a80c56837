// The most elements one model's params may hold, and the check of a param list against it.
// ParamInfo::numel() refuses a single param past the limit (instead of wrapping around).
#pragma once

#include <cstdint>

#include "shardwise/layout/param_info.hpp"

namespace shardwise {

// Far above any real model (2^50 fp32 elements are 4 PiB), low enough that byte sizes and padded
// offsets of the buffers cannot overflow int64.
inline constexpr std::int64_t kMaxModelNumel = std::int64_t{1} << 50;

// Throws ShapeError when the params together hold more than kMaxModelNumel elements (or one
// param's shape is invalid).
void validate_param_sizes(const ParamList& params);

}  // namespace shardwise
