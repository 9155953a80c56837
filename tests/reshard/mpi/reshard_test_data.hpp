// What the reshard MPI tests share to build the same "global" tensors on every rank: a
// deterministic bit mixer for seeded values and the element count of a shape.
#pragma once

#include <cstdint>
#include <vector>

namespace shardwise::reshard_test {

using Shape = std::vector<std::int64_t>;

// splitmix64's finaliser: a well-spread 64-bit value for each input, the same on every rank.
inline std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

inline std::int64_t numel_of(const Shape& s) {
  std::int64_t n = 1;
  for (auto x : s) n *= x;
  return n;
}

}  // namespace shardwise::reshard_test
