// The bulk conversions against the scalar ones of float_convert.hpp, on every ISA level the CPU
// offers: bit for bit, over every 16-bit code and fp32 values around every rounding boundary.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "shardwise/core/cpu_isa.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/core/float_convert.hpp"

namespace shardwise {
namespace {

std::vector<std::uint16_t> every_16bit_code() {
  std::vector<std::uint16_t> codes(0x10000);
  for (std::uint32_t c = 0; c < 0x10000; ++c) codes[c] = static_cast<std::uint16_t>(c);
  return codes;
}

// fp32 inputs that exercise every branch: specials, NaN payloads, fp16/bf16 subnormals, values
// just around each rounding tie and overflow threshold, and random bit patterns.
std::vector<float> tricky_floats() {
  std::vector<std::uint32_t> bits = {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u,
                                     0x7fc00000u, 0xffc00001u, 0x7f800001u, 0x7fbfffffu,
                                     0x477ff000u, 0x477fefffu, 0x477fffffu, 0x38800000u,
                                     0x387fffffu, 0x33000000u, 0x33000001u, 0x32ffffffu,
                                     0x7f7fffffu, 0x00000001u, 0x3f808000u, 0x3f818000u};
  for (std::uint32_t c = 0; c < 0x10000; ++c) {
    // Exactly on, just below and just above the bf16 and fp16 rounding midpoints.
    const std::uint32_t hi = c << 16;
    for (std::uint32_t low : {0x7fffu, 0x8000u, 0x8001u, 0x0001u}) bits.push_back(hi | low);
    const float h = fp16_to_float(static_cast<std::uint16_t>(c));
    const std::uint32_t hb = std::bit_cast<std::uint32_t>(h);
    for (std::uint32_t d : {0x0fffu, 0x1000u, 0x1001u}) bits.push_back(hb + d);
  }
  std::mt19937 gen(5);
  for (int i = 0; i < 200000; ++i) bits.push_back(gen());
  std::vector<float> out;
  for (std::uint32_t b : bits) out.push_back(std::bit_cast<float>(b));
  return out;
}

TEST(BulkConvert, WidenEveryCodeOnEveryIsaLevel) {
  const std::vector<std::uint16_t> codes = every_16bit_code();
  const auto n = static_cast<std::int64_t>(codes.size());
  for (IsaLevel level : supported_isa_levels()) {
    ScopedIsaLevel forced(level);
    std::vector<float> bf(codes.size()), fp(codes.size());
    bf16_to_float_n(codes.data(), bf.data(), n);
    fp16_to_float_n(codes.data(), fp.data(), n);
    for (std::size_t i = 0; i < codes.size(); ++i) {
      ASSERT_EQ(std::bit_cast<std::uint32_t>(bf[i]),
                std::bit_cast<std::uint32_t>(bf16_to_float(codes[i])))
          << isa_level_name(level) << " bf16 code " << i;
      ASSERT_EQ(std::bit_cast<std::uint32_t>(fp[i]),
                std::bit_cast<std::uint32_t>(fp16_to_float(codes[i])))
          << isa_level_name(level) << " fp16 code " << i;
    }
  }
}

TEST(BulkConvert, NarrowMatchesScalarRoundingOnEveryIsaLevel) {
  const std::vector<float> x = tricky_floats();
  const auto n = static_cast<std::int64_t>(x.size());
  for (IsaLevel level : supported_isa_levels()) {
    ScopedIsaLevel forced(level);
    std::vector<std::uint16_t> bf(x.size()), fp(x.size());
    float_to_bf16_n(x.data(), bf.data(), n);
    float_to_fp16_n(x.data(), fp.data(), n);
    for (std::size_t i = 0; i < x.size(); ++i) {
      const auto bits = std::bit_cast<std::uint32_t>(x[i]);
      ASSERT_EQ(bf[i], float_to_bf16(x[i])) << isa_level_name(level) << std::hex << " x=" << bits;
      ASSERT_EQ(fp[i], float_to_fp16(x[i])) << isa_level_name(level) << std::hex << " x=" << bits;
    }
  }
}

TEST(BulkConvert, EveryLengthLeavesTheNeighboursAlone) {
  // Lengths around every vector width and its tail, into a buffer with guard elements.
  for (IsaLevel level : supported_isa_levels()) {
    ScopedIsaLevel forced(level);
    for (std::int64_t n = 0; n <= 70; ++n) {
      std::vector<float> src(static_cast<std::size_t>(n));
      for (std::int64_t i = 0; i < n; ++i) src[std::size_t(i)] = 0.1f * static_cast<float>(i) - 3;
      std::vector<std::uint16_t> dst(static_cast<std::size_t>(n + 2), 0xabcd);
      float_to_bf16_n(src.data(), dst.data() + 1, n);
      EXPECT_EQ(dst.front(), 0xabcd);
      EXPECT_EQ(dst.back(), 0xabcd);
      for (std::int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(dst[std::size_t(i + 1)], float_to_bf16(src[std::size_t(i)])) << n;
      }
    }
  }
}

TEST(BulkConvert, ConvertFloatsEveryDtypePair) {
  const std::vector<float> x = {1.0f, -2.5f, 3.14159f, 65520.0f, 1e-6f, -0.0f, 1e38f};
  const auto n = static_cast<std::int64_t>(x.size());
  std::vector<std::uint16_t> bf(x.size()), fp(x.size()), bf_from_fp(x.size()), fp_from_bf(x.size());
  std::vector<float> back(x.size());
  convert_floats({const_cast<float*>(x.data()), n, DType::kFloat32}, {bf.data(), n, DType::kBFloat16});
  convert_floats({const_cast<float*>(x.data()), n, DType::kFloat32}, {fp.data(), n, DType::kFloat16});
  convert_floats({fp.data(), n, DType::kFloat16}, {bf_from_fp.data(), n, DType::kBFloat16});
  convert_floats({bf.data(), n, DType::kBFloat16}, {fp_from_bf.data(), n, DType::kFloat16});
  convert_floats({bf.data(), n, DType::kBFloat16}, {back.data(), n, DType::kFloat32});
  for (std::size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(bf[i], float_to_bf16(x[i]));
    EXPECT_EQ(fp[i], float_to_fp16(x[i]));
    EXPECT_EQ(bf_from_fp[i], float_to_bf16(fp16_to_float(fp[i])));
    EXPECT_EQ(fp_from_bf[i], float_to_fp16(bf16_to_float(bf[i])));
    EXPECT_EQ(back[i], bf16_to_float(bf[i]));
  }
  EXPECT_EQ(fp[3], 0x7c00);  // 65520 overflows fp16 to +inf
  // Same dtype: a copy.
  std::vector<std::uint16_t> copy(x.size());
  convert_floats({bf.data(), n, DType::kBFloat16}, {copy.data(), n, DType::kBFloat16});
  EXPECT_EQ(copy, bf);
}

TEST(BulkConvert, ConvertFloatsRejectsOtherDtypesAndCountMismatch) {
  std::vector<float> f(4);
  std::vector<std::int32_t> ints(4);
  std::vector<std::uint16_t> h(3);
  try {
    convert_floats({ints.data(), 4, DType::kInt32}, {f.data(), 4, DType::kFloat32}, "my tensor");
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("my tensor: source dtype int32"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(convert_floats({f.data(), 4, DType::kFloat32}, {h.data(), 3, DType::kBFloat16}),
               ShapeError);
}

}  // namespace
}  // namespace shardwise
