// FNV-1a, 64-bit: a stable hash of bytes (the same on every host and run), for fingerprints the
// ranks compare (layouts, plans, checkpoints) and per-name seeds. Not for anything adversarial.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace shardwise {

class Fnv1a {
 public:
  void bytes(const void* data, std::size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < n; ++i) {
      hash_ ^= p[i];
      hash_ *= 1099511628211ull;
    }
  }
  // Fixed little-endian encoding, so the hash does not depend on the host.
  void integer(std::int64_t v) {
    unsigned char b[8];
    for (int i = 0; i < 8; ++i) {
      b[i] = static_cast<unsigned char>(static_cast<std::uint64_t>(v) >> (8 * i));
    }
    bytes(b, 8);
  }
  // Length first, so ("ab", "c") and ("a", "bc") differ.
  void text(std::string_view s) {
    integer(static_cast<std::int64_t>(s.size()));
    bytes(s.data(), s.size());
  }
  std::uint64_t value() const { return hash_; }

 private:
  std::uint64_t hash_ = 14695981039346656037ull;
};

// The hash of `text`'s bytes alone (no length prefix).
inline std::uint64_t fnv1a(std::string_view text) {
  Fnv1a h;
  h.bytes(text.data(), text.size());
  return h.value();
}

}  // namespace shardwise
