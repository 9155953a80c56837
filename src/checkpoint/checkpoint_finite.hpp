// Internal: finding NaN/inf in tensors read from a checkpoint. A checkpoint is only ever written
// from a finite training state, so a non-finite value means damage (or a file made by hand), and
// training from it would only produce NaN.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "shardwise/core/dtype.hpp"

namespace shardwise {
class SafetensorsFile;
}

namespace shardwise::checkpoint_detail {

// Index of the first NaN or infinite element of `count` elements of `dtype` at `data` (any
// alignment), or nullopt when all are finite. Integer dtypes and scale bytes are
// not checked.
std::optional<std::int64_t> first_non_finite(const void* data, std::int64_t count, DType dtype);

// Index of the first value below zero (NaN is not), or nullopt.
std::optional<std::int64_t> first_negative(std::span<const float> values);

// Reads elements [element_offset, element_offset + count) of tensor `name` into `dst` (as
// SafetensorsFile::read_range) in pieces of 256 KiB, scanning each piece for non-finite
// values while it is still in cache: one pass over memory instead of a read and a scan.
// Returns the index (relative to element_offset) of the first non-finite element, or nullopt.
// On a non-finite value the read stops there: `dst` is then only partly written.
std::optional<std::int64_t> read_range_checked(const SafetensorsFile& file, std::string_view name,
                                               std::int64_t element_offset, std::int64_t count,
                                               void* dst);

}  // namespace shardwise::checkpoint_detail
