// streaming_copy (core/streaming_copy.hpp) against memcpy: every size around its 16-byte head
// and 64-byte steps, every source and destination misalignment, and nothing written outside the
// destination.
#include "shardwise/core/streaming_copy.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace shardwise {
namespace {

TEST(StreamingCopy, EqualsMemcpyAtEveryAlignmentAndLeavesTheRestAlone) {
  const std::size_t sizes[] = {0, 1, 15, 16, 17, 63, 64, 65, 127, 128, 1000, (1u << 20) + 3};
  std::vector<std::byte> source((1u << 20) + 64), target((1u << 20) + 128);
  for (std::size_t i = 0; i < source.size(); ++i) source[i] = std::byte(i * 131 + 7);
  for (std::size_t n : sizes) {
    for (std::size_t src_offset : {0, 1, 8, 15}) {
      for (std::size_t dst_offset = 0; dst_offset < 16; ++dst_offset) {
        std::fill(target.begin(), target.end(), std::byte{0xAB});
        streaming_copy(target.data() + dst_offset, source.data() + src_offset, n);
        ASSERT_EQ(std::memcmp(target.data() + dst_offset, source.data() + src_offset, n), 0)
            << "size " << n << " src +" << src_offset << " dst +" << dst_offset;
        // The bytes before the destination and the 64 after it (a stray vector store) are
        // untouched.
        for (std::size_t i = 0; i < dst_offset; ++i) ASSERT_EQ(target[i], std::byte{0xAB});
        for (std::size_t i = dst_offset + n; i < dst_offset + n + 64; ++i) {
          ASSERT_EQ(target[i], std::byte{0xAB}) << "byte " << i << " after a copy of " << n;
        }
      }
    }
  }
}

}  // namespace
}  // namespace shardwise
