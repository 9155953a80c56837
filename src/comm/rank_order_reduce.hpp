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

// acc = value * scale for n floats (a pass of its own, so no multiply is fused into an add:
// the scaled value is rounded exactly as scaling the input in place rounds it).
inline void scale_into(float* acc, const float* value, float scale, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) acc[i] = value[i] * scale;
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
  alignas(64) thread_local std::byte scaled[kReduceBlockBytes];
  const std::size_t block = kReduceBlockBytes / elem_size * elem_size;
  for (std::size_t offset = 0; offset < bytes; offset += block) {
    const std::size_t n = bytes - offset < block ? bytes - offset : block;
    // Rank q's contribution to this block, scaled into `into` when a scale is asked for.
    auto term = [&](int q, std::byte* into) -> const std::byte* {
      if (scale == 1.0f) return source(q) + offset;
      scale_into(reinterpret_cast<float*>(into), reinterpret_cast<const float*>(source(q) + offset),
                 scale, n / sizeof(float));
      return into;
    };
    const std::byte* partial = term(0, acc);
    if (p == 1 && partial != output + offset) std::memmove(output + offset, partial, n);
    for (int q = 1; q < p; ++q) {
      std::byte* sum = q == p - 1 ? output + offset : acc;
      combine(sum, partial, term(q, scaled), static_cast<std::int64_t>(n / elem_size));
      partial = acc;
    }
  }
}

}  // namespace shardwise
