// The element-wise reduction shared by the point-to-point and shared-memory collectives (private
// to the MPI backend): every rank's contribution combined in rank order, so each algorithm gives
// the same bits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "peer_links.hpp"

namespace shardwise {

// Elements reduced per block: the partial sums of a block stay in L1 while each rank's
// contribution streams through once.
inline constexpr std::size_t kReduceBlockBytes = 16 << 10;

// acc = value * scale for n floats.
inline void scale_into(float* acc, const float* value, float scale, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) acc[i] = value[i] * scale;
}

// sum = partial * partial_scale + value * scale for n floats, each product rounded on its own
// (the build compiles with -ffp-contract=off): the bits of scaling both inputs in place first,
// in one pass from L1 instead of two extra ones through scratch blocks (those made the scaled
// reduce-scatter ~30% slower). A partial_scale of 1 leaves the partial sum as it is (exact).
inline void scaled_sum(float* sum, const float* partial, float partial_scale, const float* value,
                       float scale, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) sum[i] = partial[i] * partial_scale + value[i] * scale;
}

// output[0, bytes) = source(0) op source(1) op ... op source(p-1), one block at a time. With
// scale != 1 every contribution is first multiplied by it (fp32 only; `combine` a sum). The first
// combine reads two sources and the last one writes the output directly (no copies through the
// accumulator). `output` may be exactly one of the sources: the sources it could alias are read
// before, or element by element with, the write of each output block.
template <typename Source>
void reduce_in_rank_order(int p, std::size_t bytes, std::size_t elem_size, ElementCombine combine,
                          float scale, Source&& source, std::byte* output) {
  alignas(64) thread_local std::byte acc[kReduceBlockBytes];
  const std::size_t block = kReduceBlockBytes / elem_size * elem_size;
  for (std::size_t offset = 0; offset < bytes; offset += block) {
    const std::size_t n = bytes - offset < block ? bytes - offset : block;
    if (p == 1) {
      if (scale != 1.0f) {
        scale_into(reinterpret_cast<float*>(output + offset),
                   reinterpret_cast<const float*>(source(0) + offset), scale, n / sizeof(float));
      } else if (source(0) + offset != output + offset) {
        std::memmove(output + offset, source(0) + offset, n);
      }
      continue;
    }
    const std::byte* partial = source(0) + offset;
    float partial_scale = scale;  // the raw first source; the accumulator is already scaled
    for (int q = 1; q < p; ++q) {
      std::byte* sum = q == p - 1 ? output + offset : acc;
      if (scale == 1.0f) {
        combine(sum, partial, source(q) + offset, static_cast<std::int64_t>(n / elem_size));
      } else {
        scaled_sum(reinterpret_cast<float*>(sum), reinterpret_cast<const float*>(partial),
                   partial_scale, reinterpret_cast<const float*>(source(q) + offset), scale,
                   n / sizeof(float));
      }
      partial = acc;
      partial_scale = 1.0f;
    }
  }
}

}  // namespace shardwise
