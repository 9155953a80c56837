#include "checkpoint_finite.hpp"

#include <algorithm>
#include <cstring>

#include "shardwise/checkpoint/safetensors.hpp"
#include "shardwise/core/cpu_isa.hpp"

namespace shardwise::checkpoint_detail {
namespace {

// Elements are tested a chunk at a time with a branch-free reduction (which the compiler
// vectorises); only a chunk that holds a non-finite value is searched element by element.
constexpr std::int64_t kScanChunk = 1024;

template <typename Bits>
SW_KERNEL_INLINE Bits load_bits(const unsigned char* bytes, std::int64_t index) {
  Bits bits;
  std::memcpy(&bits, bytes + index * static_cast<std::int64_t>(sizeof(Bits)), sizeof(Bits));
  return bits;
}

// A value is non-finite exactly when every bit of `exponent_mask` is set (fp32, bf16, fp16; for
// E4M3, which has no infinities, the mask 0x7f finds NaN 0x7f / 0xff). Returns `count` when
// every value is finite.
template <typename Bits>
SW_KERNEL_INLINE std::int64_t scan_bits(const unsigned char* bytes, std::int64_t count,
                                        Bits exponent_mask) {
  for (std::int64_t begin = 0; begin < count; begin += kScanChunk) {
    const std::int64_t end = std::min(begin + kScanChunk, count);
    // Lane-wise compare and OR: vectorised (a bool or an early exit here is not).
    Bits hits = 0;
    for (std::int64_t i = begin; i < end; ++i) {
      const Bits bits = load_bits<Bits>(bytes, i);
      hits |= static_cast<Bits>((bits & exponent_mask) == exponent_mask);
    }
    if (hits == 0) continue;
    for (std::int64_t i = begin; i < end; ++i) {
      if ((load_bits<Bits>(bytes, i) & exponent_mask) == exponent_mask) return i;
    }
  }
  return count;
}

// The first element below zero, or `count` (as scan_bits; NaN is not below zero).
SW_KERNEL_INLINE std::int64_t scan_negative(const float* values, std::int64_t count) {
  for (std::int64_t begin = 0; begin < count; begin += kScanChunk) {
    const std::int64_t end = std::min(begin + kScanChunk, count);
    std::uint32_t hits = 0;
    for (std::int64_t i = begin; i < end; ++i) hits |= static_cast<std::uint32_t>(values[i] < 0.0f);
    if (hits == 0) continue;
    for (std::int64_t i = begin; i < end; ++i) {
      if (values[i] < 0.0f) return i;
    }
  }
  return count;
}

// The scans at each ISA level: a checkpoint load scans every byte it reads, in cache, and at the
// baseline's 16-byte vectors that was 14% of a load's CPU time on an AVX-512 Xeon.
struct ScanKernels {
  std::int64_t (*fp32)(const unsigned char*, std::int64_t);
  std::int64_t (*half)(const unsigned char*, std::int64_t, std::uint16_t);
  std::int64_t (*e4m3)(const unsigned char*, std::int64_t);
  std::int64_t (*negative)(const float*, std::int64_t);
};

#define SW_SCAN_KERNELS(TARGET, SUFFIX)                                                            \
  TARGET std::int64_t scan_fp32_##SUFFIX(const unsigned char* b, std::int64_t n) {                 \
    return scan_bits<std::uint32_t>(b, n, 0x7f800000u);                                            \
  }                                                                                                \
  TARGET std::int64_t scan_half_##SUFFIX(const unsigned char* b, std::int64_t n,                   \
                                         std::uint16_t mask) {                                     \
    return scan_bits<std::uint16_t>(b, n, mask);                                                   \
  }                                                                                                \
  TARGET std::int64_t scan_e4m3_##SUFFIX(const unsigned char* b, std::int64_t n) {                 \
    return scan_bits<std::uint8_t>(b, n, 0x7f);                                                    \
  }                                                                                                \
  TARGET std::int64_t scan_negative_##SUFFIX(const float* v, std::int64_t n) {                     \
    return scan_negative(v, n);                                                                    \
  }                                                                                                \
  constexpr ScanKernels kScan_##SUFFIX{scan_fp32_##SUFFIX, scan_half_##SUFFIX, scan_e4m3_##SUFFIX, \
                                       scan_negative_##SUFFIX};

SW_SCAN_KERNELS(, baseline)
SW_SCAN_KERNELS(SW_TARGET_AVX2, avx2)
SW_SCAN_KERNELS(SW_TARGET_AVX512, avx512)
#undef SW_SCAN_KERNELS

const ScanKernels& scan_kernels() {
  static constexpr ScanKernels kTable[kNumIsaLevels] = {kScan_baseline, kScan_avx2, kScan_avx512};
  return dispatch(kTable);
}

std::optional<std::int64_t> found(std::int64_t index, std::int64_t count) {
  return index < count ? std::optional<std::int64_t>(index) : std::nullopt;
}

constexpr std::int64_t kReadPieceBytes = std::int64_t{256} << 10;

}  // namespace

std::optional<std::int64_t> first_non_finite(const void* data, std::int64_t count, DType dtype) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  const ScanKernels& scan = scan_kernels();
  switch (dtype) {
    case DType::kFloat32:
      return found(scan.fp32(bytes, count), count);
    case DType::kBFloat16:
      return found(scan.half(bytes, count, 0x7f80), count);
    case DType::kFloat16:
      return found(scan.half(bytes, count, 0x7c00), count);
    case DType::kFloat8E4M3:
      return found(scan.e4m3(bytes, count), count);
    default:
      return std::nullopt;
  }
}

std::optional<std::int64_t> first_negative(std::span<const float> values) {
  const auto count = static_cast<std::int64_t>(values.size());
  return found(scan_kernels().negative(values.data(), count), count);
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
