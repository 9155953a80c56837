#include "shardwise/comm/symmetric_memory.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

namespace shardwise {

SymmetricMemoryPtr private_symmetric_memory(std::size_t bytes) {
  constexpr std::size_t kAlignment = 4096;  // as the shared segments' page-aligned allocations
  const std::size_t padded =
      (std::max<std::size_t>(bytes, 1) + kAlignment - 1) / kAlignment * kAlignment;
  void* data = std::aligned_alloc(kAlignment, padded);
  if (data == nullptr) throw std::bad_alloc();
  std::memset(data, 0, padded);
  std::shared_ptr<void> owner(data, [](void* p) { std::free(p); });
  return std::make_shared<SymmetricMemory>(static_cast<std::byte*>(data), bytes, false,
                                           std::move(owner));
}

}  // namespace shardwise
