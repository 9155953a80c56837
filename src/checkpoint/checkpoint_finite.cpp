#include "checkpoint_finite.hpp"

#include <algorithm>
#include <cstring>

#include "shardwise/checkpoint/safetensors.hpp"
#include "shardwise/core/cpu_isa.hpp"

namespace shardwise::checkpoint_detail {
namespace {

// Elements are tested a chunk at a time with a branch-free reduction (which the compiler
// vectorises); only a chunk that holds a bad value is searched element by element.
constexpr std::int64_t kScanChunk = 1024;

template <typename Bits>
SW_KERNEL_INLINE Bits load_bits(const unsigned char* bytes, std::int64_t index) {
  Bits bits;
  std::memcpy(&bits, bytes + index * static_cast<std::int64_t>(sizeof(Bits)), sizeof(Bits));
  return bits;
}

// A value is bad when every bit of `exponent_mask` is set (NaN or inf for fp32, bf16 and fp16;
// for E4M3, which has no infinities, the mask 0x7f finds NaN 0x7f / 0xff), or when its bits, read
// as an unsigned integer, exceed `negative_above`: given the sign bit alone (-0.0), that is every
// value below zero; given the all-ones pattern, nothing. Returns `count` when no value is bad.
template <typename Bits>
SW_KERNEL_INLINE std::int64_t scan_bits(const unsigned char* bytes, std::int64_t count,
                                        Bits exponent_mask, Bits negative_above) {
  auto bad = [&](std::int64_t i) {
    const Bits bits = load_bits<Bits>(bytes, i);
    return static_cast<Bits>(((bits & exponent_mask) == exponent_mask) | (bits > negative_above));
  };
  for (std::int64_t begin = 0; begin < count; begin += kScanChunk) {
    const std::int64_t end = std::min(begin + kScanChunk, count);
    // Lane-wise compares and OR: vectorised (a bool or an early exit here is not).
    Bits hits = 0;
    for (std::int64_t i = begin; i < end; ++i) hits |= bad(i);
    if (hits == 0) continue;
    for (std::int64_t i = begin; i < end; ++i) {
      if (bad(i) != 0) return i;
    }
  }
  return count;
}

// The scan at each ISA level, per element width: a checkpoint load scans every byte it reads, in
// cache, and at the baseline's 16-byte vectors that was 14% of a load's CPU time on an AVX-512
// Xeon.
struct ScanKernels {
  std::int64_t (*bits32)(const unsigned char*, std::int64_t, std::uint32_t, std::uint32_t);
  std::int64_t (*bits16)(const unsigned char*, std::int64_t, std::uint16_t, std::uint16_t);
  std::int64_t (*bits8)(const unsigned char*, std::int64_t, std::uint8_t, std::uint8_t);
};

#define SW_SCAN_KERNEL(TARGET, SUFFIX, WIDTH)                                        \
  TARGET std::int64_t scan##WIDTH##_##SUFFIX(const unsigned char* b, std::int64_t n, \
                                             std::uint##WIDTH##_t mask,              \
                                             std::uint##WIDTH##_t negative_above) {  \
    return scan_bits<std::uint##WIDTH##_t>(b, n, mask, negative_above);              \
  }
#define SW_SCAN_KERNELS(TARGET, SUFFIX) \
  SW_SCAN_KERNEL(TARGET, SUFFIX, 32)    \
  SW_SCAN_KERNEL(TARGET, SUFFIX, 16)    \
  SW_SCAN_KERNEL(TARGET, SUFFIX, 8)     \
  constexpr ScanKernels kScan_##SUFFIX{scan32_##SUFFIX, scan16_##SUFFIX, scan8_##SUFFIX};

SW_SCAN_KERNELS(, baseline)
SW_SCAN_KERNELS(SW_TARGET_AVX2, avx2)
SW_SCAN_KERNELS(SW_TARGET_AVX512, avx512)
#undef SW_SCAN_KERNELS
#undef SW_SCAN_KERNEL

const ScanKernels& scan_kernels() {
  static constexpr ScanKernels kTable[kNumIsaLevels] = {kScan_baseline, kScan_avx2, kScan_avx512};
  return dispatch(kTable);
}

std::optional<std::int64_t> found(std::int64_t index, std::int64_t count) {
  return index < count ? std::optional<std::int64_t>(index) : std::nullopt;
}

constexpr std::int64_t kReadPieceBytes = std::int64_t{256} << 10;

}  // namespace

std::optional<std::int64_t> first_bad_value(const void* data, std::int64_t count, DType dtype,
                                            ValueCheck check) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  const ScanKernels& scan = scan_kernels();
  const bool sign_matters = check == ValueCheck::kFiniteNonNegative;
  // Exponent mask, and the sign bit (or all ones when the sign does not matter).
  auto run = [&](auto kernel, auto mask, auto sign) {
    using Bits = decltype(mask);
    const Bits above = sign_matters ? static_cast<Bits>(sign) : static_cast<Bits>(~Bits{0});
    return found(kernel(bytes, count, mask, above), count);
  };
  switch (dtype) {
    case DType::kFloat32:
      return run(scan.bits32, std::uint32_t{0x7f800000u}, std::uint32_t{0x80000000u});
    case DType::kBFloat16:
      return run(scan.bits16, std::uint16_t{0x7f80}, std::uint16_t{0x8000});
    case DType::kFloat16:
      return run(scan.bits16, std::uint16_t{0x7c00}, std::uint16_t{0x8000});
    case DType::kFloat8E4M3:
      return run(scan.bits8, std::uint8_t{0x7f}, std::uint8_t{0x80});
    default:
      return std::nullopt;
  }
}

std::optional<std::int64_t> read_range_checked(const SafetensorsFile& file, std::string_view name,
                                               std::int64_t element_offset, std::int64_t count,
                                               void* dst, ValueCheck check) {
  const DType dtype = file.info(name).dtype;
  const auto size = static_cast<std::int64_t>(dtype_size(dtype));
  const std::int64_t piece = std::max<std::int64_t>(1, kReadPieceBytes / size);
  auto* out = static_cast<unsigned char*>(dst);
  for (std::int64_t done = 0; done < count; done += piece) {
    const std::int64_t n = std::min(piece, count - done);
    file.read_range(name, element_offset + done, n, out + done * size);
    if (const auto bad = first_bad_value(out + done * size, n, dtype, check)) return done + *bad;
  }
  return std::nullopt;
}

}  // namespace shardwise::checkpoint_detail
