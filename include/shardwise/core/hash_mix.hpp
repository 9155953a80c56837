// SplitMix64's finaliser: a cheap, well-mixed 64-bit hash, for deterministic pseudo-random
// choices that must not depend on a random engine's state (which sample, which window).
#pragma once

#include <cstdint>

namespace shardwise {

inline std::uint64_t hash_mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace shardwise
