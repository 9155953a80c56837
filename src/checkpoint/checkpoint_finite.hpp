// Internal: finding NaN/inf (and negative values in fields that cannot hold them) in tensors read
// from a checkpoint. A checkpoint is only ever written from a finite training state, so such a
// value means damage (or a file made by hand), and training from it would only produce NaN.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "shardwise/core/dtype.hpp"

namespace shardwise {
class SafetensorsFile;
}

namespace shardwise::checkpoint_detail {

// What a scan of loaded values rejects: NaN and inf, and for fields that can only hold values of
// zero or more (a running mean of squares), also values below zero (-0.0 is not).
enum class ValueCheck { kFinite, kFiniteNonNegative };

// Index of the first of `count` elements of `dtype` at `data` (any alignment) that `check`
// rejects, or nullopt. Integer dtypes and scale bytes are not checked.
std::optional<std::int64_t> first_bad_value(const void* data, std::int64_t count, DType dtype,
                                            ValueCheck check);

// Reads elements [element_offset, element_offset + count) of tensor `name` into `dst` (as
// SafetensorsFile::read_range) in pieces of 256 KiB, scanning each piece with `check` while it
// is still in cache: one pass over memory instead of a read and a scan. Returns the index
// (relative to element_offset) of the first rejected element, or nullopt. The read stops after
// the piece holding it: `dst` then holds that element but is only partly written.
std::optional<std::int64_t> read_range_checked(const SafetensorsFile& file, std::string_view name,
                                               std::int64_t element_offset, std::int64_t count,
                                               void* dst, ValueCheck check);

}  // namespace shardwise::checkpoint_detail
