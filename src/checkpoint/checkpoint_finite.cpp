#include "checkpoint_finite.hpp"

#include <cmath>
#include <cstring>

namespace shardwise::checkpoint_detail {
namespace {

template <typename T>
std::optional<std::int64_t> scan_real(const unsigned char* bytes, std::int64_t count) {
  for (std::int64_t i = 0; i < count; ++i) {
    T value;
    std::memcpy(&value, bytes + i * static_cast<std::int64_t>(sizeof(T)), sizeof(T));
    if (!std::isfinite(value)) return i;
  }
  return std::nullopt;
}

// 16-bit floats: non-finite exactly when every exponent bit is set.
std::optional<std::int64_t> scan_half(const unsigned char* bytes, std::int64_t count,
                                      std::uint16_t exponent_mask) {
  for (std::int64_t i = 0; i < count; ++i) {
    std::uint16_t bits;
    std::memcpy(&bits, bytes + 2 * i, 2);
    if ((bits & exponent_mask) == exponent_mask) return i;
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::int64_t> first_non_finite(const void* data, std::int64_t count, DType dtype) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  switch (dtype) {
    case DType::kFloat32:
      return scan_real<float>(bytes, count);
    case DType::kBFloat16:
      return scan_half(bytes, count, 0x7f80);
    case DType::kFloat16:
      return scan_half(bytes, count, 0x7c00);
    case DType::kFloat8E4M3:  // no infinities; NaN is 0x7f / 0xff
      for (std::int64_t i = 0; i < count; ++i) {
        if ((bytes[i] & 0x7f) == 0x7f) return i;
      }
      return std::nullopt;
    default:
      return std::nullopt;
  }
}

}  // namespace shardwise::checkpoint_detail
