#include "checkpoint_finite.hpp"

#include <algorithm>
#include <cstring>

#include "shardwise/checkpoint/safetensors.hpp"

namespace shardwise::checkpoint_detail {
namespace {

// Elements are tested a chunk at a time with a branch-free reduction (which the compiler
// vectorises); only a chunk that holds a non-finite value is searched element by element.
constexpr std::int64_t kScanChunk = 256;

// Non-finite exactly when every exponent bit is set (fp32, bf16, fp16; E4M3 NaN is 0x7f / 0xff,
// E4M3 has no infinities).
template <typename Bits>
bool is_non_finite(Bits bits, Bits exponent_mask) {
  return (bits & exponent_mask) == exponent_mask;
}

template <typename Bits>
std::optional<std::int64_t> scan_bits(const unsigned char* bytes, std::int64_t count,
                                      Bits exponent_mask) {
  for (std::int64_t begin = 0; begin < count; begin += kScanChunk) {
    const std::int64_t n = std::min(kScanChunk, count - begin);
    Bits chunk[kScanChunk];
    std::memcpy(chunk, bytes + begin * static_cast<std::int64_t>(sizeof(Bits)),
                static_cast<std::size_t>(n) * sizeof(Bits));
    bool any = false;
    for (std::int64_t i = 0; i < n; ++i) any |= is_non_finite(chunk[i], exponent_mask);
    if (!any) continue;
    for (std::int64_t i = 0; i < n; ++i) {
      if (is_non_finite(chunk[i], exponent_mask)) return begin + i;
    }
  }
  return std::nullopt;
}

constexpr std::int64_t kReadPieceBytes = std::int64_t{1} << 20;

}  // namespace

std::optional<std::int64_t> first_non_finite(const void* data, std::int64_t count, DType dtype) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  switch (dtype) {
    case DType::kFloat32:
      return scan_bits<std::uint32_t>(bytes, count, 0x7f800000u);
    case DType::kBFloat16:
      return scan_bits<std::uint16_t>(bytes, count, 0x7f80);
    case DType::kFloat16:
      return scan_bits<std::uint16_t>(bytes, count, 0x7c00);
    case DType::kFloat8E4M3:
      return scan_bits<std::uint8_t>(bytes, count, 0x7f);
    default:
      return std::nullopt;
  }
}

std::optional<std::int64_t> read_range_checked(const SafetensorsFile& file, std::string_view name,
                                               std::int64_t element_offset, std::int64_t count,
                                               void* dst) {
  const DType dtype = file.info(name).dtype;
  const auto size = static_cast<std::int64_t>(dtype_size(dtype));
  const std::int64_t piece = std::max<std::int64_t>(1, kReadPieceBytes / size);
  auto* out = static_cast<unsigned char*>(dst);
  for (std::int64_t done = 0; done < count; done += piece) {
    const std::int64_t n = std::min(piece, count - done);
    file.read_range(name, element_offset + done, n, out + done * size);
    if (const auto bad = first_non_finite(out + done * size, n, dtype)) return done + *bad;
  }
  return std::nullopt;
}

}  // namespace shardwise::checkpoint_detail
