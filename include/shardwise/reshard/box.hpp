// Box: an N-d slice of a tensor, one half-open [start, stop) range per dimension. Sharding specs,
// reshard plans and transfers are all expressed as boxes; local storage of a box is a separate
// row-major array of the box's extents.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "shardwise/core/mxfp8.hpp"  // IndexRange

namespace shardwise {

struct Box {
  std::vector<IndexRange> ranges;  // one per dimension

  Box() = default;
  explicit Box(std::vector<IndexRange> r) : ranges(std::move(r)) {}
  // The whole of a tensor of `shape`.
  static Box whole(const std::vector<std::int64_t>& shape);

  std::size_t ndim() const { return ranges.size(); }
  std::int64_t numel() const;
  bool empty() const { return numel() == 0; }
  std::vector<std::int64_t> extents() const;

  bool operator==(const Box& other) const = default;
  // Lexicographic over (start, stop) per dimension: a total order for deterministic planning.
  bool operator<(const Box& other) const;
};

// "[0:4, 8:16]"
std::string to_string(const Box& box);
std::string to_string(const std::vector<std::int64_t>& shape);

// Intersection of two boxes of the same ndim; nullopt when empty.
std::optional<Box> intersect(const Box& a, const Box& b);
bool contains(const Box& outer, const Box& inner);
// `a` minus `b` (b inside a) as disjoint boxes, in a deterministic order (slabs by dimension).
std::vector<Box> subtract(const Box& a, const Box& b);
// `inner` (global coordinates, inside `outer`) in the coordinates of `outer`.
Box relative_to(const Box& inner, const Box& outer);

// Whether `slice` of a row-major array with `extents` is one contiguous run of memory.
bool is_contiguous_in(const Box& slice, const std::vector<std::int64_t>& extents);
// Row-major element offset of the first element of `slice` in an array with `extents`.
std::int64_t flat_offset(const Box& slice, const std::vector<std::int64_t>& extents);

// Copies the elements of `src_slice` of the row-major array `src` (extents `src_extents`) into
// `dst_slice` of `dst` (extents `dst_extents`). The two slices must have equal extents. Inner
// runs that are contiguous in both arrays are copied with one memcpy.
void copy_box(const void* src, const std::vector<std::int64_t>& src_extents, const Box& src_slice,
              void* dst, const std::vector<std::int64_t>& dst_extents, const Box& dst_slice,
              std::size_t element_size);

}  // namespace shardwise
