#include "shardwise/reshard/box.hpp"

#include <algorithm>
#include <cstring>
#include <sstream>

#include "shardwise/core/error.hpp"

namespace shardwise {

Box Box::whole(const std::vector<std::int64_t>& shape) {
  Box box;
  for (std::int64_t n : shape) box.ranges.push_back({0, n});
  return box;
}

std::int64_t Box::numel() const {
  std::int64_t n = 1;
  for (const IndexRange& r : ranges) n *= std::max<std::int64_t>(0, r.stop - r.start);
  return n;
}

std::vector<std::int64_t> Box::extents() const {
  std::vector<std::int64_t> e;
  e.reserve(ranges.size());
  for (const IndexRange& r : ranges) e.push_back(r.stop - r.start);
  return e;
}

bool Box::operator<(const Box& other) const {
  const std::size_t n = std::min(ranges.size(), other.ranges.size());
  for (std::size_t d = 0; d < n; ++d) {
    if (ranges[d].start != other.ranges[d].start) return ranges[d].start < other.ranges[d].start;
    if (ranges[d].stop != other.ranges[d].stop) return ranges[d].stop < other.ranges[d].stop;
  }
  return ranges.size() < other.ranges.size();
}

std::string to_string(const Box& box) {
  std::ostringstream out;
  out << '[';
  for (std::size_t d = 0; d < box.ranges.size(); ++d) {
    if (d) out << ", ";
    out << box.ranges[d].start << ':' << box.ranges[d].stop;
  }
  out << ']';
  return out.str();
}

std::string to_string(const std::vector<std::int64_t>& shape) {
  std::ostringstream out;
  out << '[';
  for (std::size_t d = 0; d < shape.size(); ++d) out << (d ? ", " : "") << shape[d];
  out << ']';
  return out.str();
}

std::optional<Box> intersect(const Box& a, const Box& b) {
  SW_CHECK(a.ndim() == b.ndim(), "intersect of boxes with ", a.ndim(), " and ", b.ndim(), " dims");
  Box out;
  out.ranges.resize(a.ndim());
  for (std::size_t d = 0; d < a.ndim(); ++d) {
    const std::int64_t lo = std::max(a.ranges[d].start, b.ranges[d].start);
    const std::int64_t hi = std::min(a.ranges[d].stop, b.ranges[d].stop);
    if (lo >= hi) return std::nullopt;
    out.ranges[d] = {lo, hi};
  }
  return out;
}

bool contains(const Box& outer, const Box& inner) {
  if (outer.ndim() != inner.ndim()) return false;
  for (std::size_t d = 0; d < outer.ndim(); ++d) {
    if (inner.ranges[d].start < outer.ranges[d].start ||
        inner.ranges[d].stop > outer.ranges[d].stop) {
      return false;
    }
  }
  return true;
}

std::vector<Box> subtract(const Box& a, const Box& b) {
  SW_CHECK(contains(a, b), "subtract: ", to_string(b), " is not inside ", to_string(a));
  std::vector<Box> parts;
  Box rest = a;  // shrinks to b one dimension at a time
  for (std::size_t d = 0; d < a.ndim(); ++d) {
    if (rest.ranges[d].start < b.ranges[d].start) {
      Box left = rest;
      left.ranges[d] = {rest.ranges[d].start, b.ranges[d].start};
      parts.push_back(std::move(left));
    }
    if (b.ranges[d].stop < rest.ranges[d].stop) {
      Box right = rest;
      right.ranges[d] = {b.ranges[d].stop, rest.ranges[d].stop};
      parts.push_back(std::move(right));
    }
    rest.ranges[d] = b.ranges[d];
  }
  return parts;
}

Box relative_to(const Box& inner, const Box& outer) {
  SW_CHECK(contains(outer, inner), to_string(inner), " is not inside ", to_string(outer));
  Box out = inner;
  for (std::size_t d = 0; d < inner.ndim(); ++d) {
    out.ranges[d].start -= outer.ranges[d].start;
    out.ranges[d].stop -= outer.ranges[d].start;
  }
  return out;
}

bool is_contiguous_in(const Box& slice, const std::vector<std::int64_t>& extents) {
  // Contiguous iff, scanning from the innermost dimension, all dimensions span the full extent
  // up to one dimension k, and every dimension before k has extent 1.
  const std::size_t n = slice.ndim();
  std::size_t d = n;
  while (d > 0 && slice.ranges[d - 1].start == 0 && slice.ranges[d - 1].stop == extents[d - 1]) --d;
  if (d == 0) return true;
  for (std::size_t k = 0; k + 1 < d; ++k) {
    if (slice.ranges[k].stop - slice.ranges[k].start != 1) return false;
  }
  return true;
}

namespace {

// ShapeError unless every range of `slice` lies in [0, extent) of its dimension.
void require_inside(const Box& slice, const std::vector<std::int64_t>& extents, const char* what) {
  SW_REQUIRE(extents.size() == slice.ndim(), ShapeError, what, " ", to_string(slice), " has ",
             slice.ndim(), " dimensions, its tensor ", extents.size());
  for (std::size_t d = 0; d < slice.ndim(); ++d) {
    const IndexRange& r = slice.ranges[d];
    SW_REQUIRE(0 <= r.start && r.start <= r.stop && r.stop <= extents[d], ShapeError, what, " ",
               to_string(slice), " does not lie inside its tensor's extents (dimension ", d, " is ",
               extents[d], ")");
  }
}

}  // namespace

std::int64_t flat_offset(const Box& slice, const std::vector<std::int64_t>& extents) {
  require_inside(slice, extents, "flat_offset: slice");
  std::int64_t offset = 0;
  for (std::size_t d = 0; d < slice.ndim(); ++d)
    offset = offset * extents[d] + slice.ranges[d].start;
  return offset;
}

void copy_box(const void* src, const std::vector<std::int64_t>& src_extents, const Box& src_slice,
              void* dst, const std::vector<std::int64_t>& dst_extents, const Box& dst_slice,
              std::size_t element_size) {
  const std::size_t n = src_slice.ndim();
  SW_CHECK(dst_slice.ndim() == n && src_extents.size() == n && dst_extents.size() == n,
           "copy_box: dimension counts differ");
  const std::vector<std::int64_t> ext = src_slice.extents();
  SW_CHECK(ext == dst_slice.extents(), "copy_box: ", to_string(src_slice), " vs ",
           to_string(dst_slice));
  require_inside(src_slice, src_extents, "copy_box: source slice");
  require_inside(dst_slice, dst_extents, "copy_box: destination slice");
  if (src_slice.numel() == 0) return;
  // Merge inner dimensions while both slices span them fully: one memcpy per run.
  std::size_t inner = n;  // dims [inner, n) form the run
  std::int64_t run = 1;
  while (inner > 0) {
    const std::size_t d = inner - 1;
    run *= ext[d];
    --inner;
    const bool src_full = ext[d] == src_extents[d];
    const bool dst_full = ext[d] == dst_extents[d];
    if (!src_full || !dst_full) break;
  }
  // Row-major strides (elements) of both arrays.
  std::vector<std::int64_t> src_stride(n, 1), dst_stride(n, 1);
  for (std::size_t d = n; d-- > 1;) {
    src_stride[d - 1] = src_stride[d] * src_extents[d];
    dst_stride[d - 1] = dst_stride[d] * dst_extents[d];
  }
  const auto* s = static_cast<const std::byte*>(src);
  auto* t = static_cast<std::byte*>(dst);
  const std::size_t run_bytes = static_cast<std::size_t>(run) * element_size;
  std::vector<std::int64_t> index(inner, 0);  // over the outer dims [0, inner)
  while (true) {
    std::int64_t so = 0, to = 0;
    for (std::size_t d = 0; d < n; ++d) {
      const std::int64_t i = d < inner ? index[d] : 0;
      so += (src_slice.ranges[d].start + i) * src_stride[d];
      to += (dst_slice.ranges[d].start + i) * dst_stride[d];
    }
    std::memcpy(t + static_cast<std::size_t>(to) * element_size,
                s + static_cast<std::size_t>(so) * element_size, run_bytes);
    std::size_t d = inner;
    while (d > 0) {
      --d;
      if (++index[d] < ext[d]) break;
      index[d] = 0;
      if (d == 0) return;
    }
    if (inner == 0) return;
  }
}

}  // namespace shardwise
