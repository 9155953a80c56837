// Staging memory for the reshard executor, kept by its caller across calls.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace shardwise {

// Staging memory kept across reshards: a refit reshards the same plan every step, and fresh
// staging buffers cost a page fault per 4 KiB each time (half the time of a 4-rank packed-columns
// reshard on a 2-core VM). Blocks are handed out in order and reused while big enough.
class ReshardWorkspace {
 public:
  // `bytes` of unfilled storage (8-byte aligned), valid until the next reset().
  void* take(std::size_t bytes);
  // Every block free again.
  void reset() { next_ = 0; }
  std::size_t bytes_held() const;

 private:
  struct Block {
    std::unique_ptr<std::uint64_t[]> words;
    std::size_t bytes = 0;
  };
  std::vector<Block> blocks_;
  std::size_t next_ = 0;
};

}  // namespace shardwise
