// memcpy with non-temporal stores, for copies into collective outputs larger than the caches.
// A normal store to a line that is not cached first reads the line (read-for-ownership), so a
// copy into a cold 8 MiB output moves 24 MiB through memory; streaming stores write without
// reading, 16 MiB. Collectives on one node are bound by exactly this traffic (two ranks copy at
// once on a machine with one memory controller). SSE2 only: every x86-64 CPU has it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace shardwise {

// Collective outputs from this size on are written with streaming stores: larger than what one
// rank can expect to keep in a shared L3, so the stores would evict it anyway. (Measured,
// all-gather of 16 MiB at 2 ranks and 64 MiB at 4 on a 2-core AVX2 VM, the modes interleaved in one
// process: 4-12% and 24% less time.)
inline constexpr std::size_t kStreamingCopyMinBytes = std::size_t{8} << 20;

inline void streaming_copy(std::byte* dst, const std::byte* src, std::size_t n) {
#if defined(__x86_64__)
  // Head up to 16-byte alignment of dst, then 64 bytes per iteration, then the tail.
  const std::size_t head =
      std::min<std::size_t>(n, (16 - reinterpret_cast<std::uintptr_t>(dst) % 16) % 16);
  std::memcpy(dst, src, head);
  std::size_t i = head;
  for (; i + 64 <= n; i += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 32));
    const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 48), d);
  }
  std::memcpy(dst + i, src + i, n - i);
  _mm_sfence();  // streaming stores are weakly ordered: finish them before anyone is told
#else
  std::memcpy(dst, src, n);
#endif
}

// Copies `n` bytes into a collective output of `output_bytes` in all: with streaming stores from
// kStreamingCopyMinBytes on, with memcpy below (a small output may well stay in cache for its
// reader).
inline void copy_into_output(std::byte* dst, const std::byte* src, std::size_t n,
                             std::size_t output_bytes) {
  if (output_bytes >= kStreamingCopyMinBytes) {
    streaming_copy(dst, src, n);
  } else {
    std::memcpy(dst, src, n);
  }
}

}  // namespace shardwise
