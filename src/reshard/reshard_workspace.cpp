#include "shardwise/reshard/reshard_workspace.hpp"

namespace shardwise {

void* ReshardWorkspace::take(std::size_t bytes) {
  if (next_ == blocks_.size()) blocks_.emplace_back();
  Block& block = blocks_[next_++];
  if (block.bytes < bytes) {
    block.words = std::make_unique_for_overwrite<std::uint64_t[]>((bytes + 7) / 8);
    block.bytes = (bytes + 7) / 8 * 8;
  }
  return block.words.get();
}

std::size_t ReshardWorkspace::bytes_held() const {
  std::size_t total = 0;
  for (const Block& block : blocks_) total += block.bytes;
  return total;
}

}  // namespace shardwise
