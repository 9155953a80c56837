#include "shardwise/comm/symmetric_memory.hpp"

#include <cstdlib>
#include <cstring>
#include <new>

#include "symmetric_regions.hpp"

namespace shardwise {

SymmetricMemoryPtr private_symmetric_memory(std::size_t bytes) {
  // Page-aligned and page-sized, as each rank's part of a shared segment.
  const std::size_t padded = symmetric_stride(bytes);
  void* data = std::aligned_alloc(kSymmetricPageBytes, padded);
  if (data == nullptr) throw std::bad_alloc();
  std::memset(data, 0, padded);
  std::shared_ptr<void> owner(data, [](void* p) { std::free(p); });
  return std::make_shared<SymmetricMemory>(static_cast<std::byte*>(data), bytes, false,
                                           std::move(owner));
}

}  // namespace shardwise
