// Widening and rounding helpers of the fp32-accumulated 16-bit reductions.
#include "shardwise/comm/fp32_accumulation.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "shardwise/core/float_convert.hpp"

namespace shardwise {
namespace {

TEST(Fp32Accumulation, WidenNarrowRoundTripsEveryCode) {
  for (DType dtype : {DType::kBFloat16, DType::kFloat16}) {
    std::vector<std::uint16_t> codes;
    for (std::uint32_t c = 0; c < 0x10000; ++c) {
      const auto code = static_cast<std::uint16_t>(c);
      const float f = dtype == DType::kBFloat16 ? bf16_to_float(code) : fp16_to_float(code);
      if (f == f) codes.push_back(code);  // skip NaNs (payloads are not preserved)
    }
    std::vector<float> wide(codes.size());
    widen_to_fp32({codes.data(), static_cast<std::int64_t>(codes.size()), dtype}, wide.data());
    std::vector<std::uint16_t> back(codes.size());
    narrow_from_fp32(wide.data(), {back.data(), static_cast<std::int64_t>(back.size()), dtype}, 1);
    EXPECT_EQ(back, codes) << dtype_name(dtype);
  }
}

TEST(Fp32Accumulation, NarrowRoundsOnceAfterDividing) {
  // bf16 has 8 significant bits: 257 is a tie between 256 and 258 -> 256 (even); 771 / 3 = 257.
  std::vector<float> sums = {257.0f, 771.0f, 259.0f};
  std::vector<std::uint16_t> out(3);
  narrow_from_fp32(sums.data(), {out.data(), 3, DType::kBFloat16}, 1);
  EXPECT_EQ(bf16_to_float(out[0]), 256.0f);
  EXPECT_EQ(bf16_to_float(out[2]), 260.0f);
  narrow_from_fp32(sums.data(), {out.data(), 3, DType::kBFloat16}, 3);
  EXPECT_EQ(bf16_to_float(out[1]), 256.0f);  // 257 rounded once
  EXPECT_FALSE(reduces_through_fp32(DType::kFloat32));
  EXPECT_TRUE(reduces_through_fp32(DType::kFloat16));
  std::vector<float> f = {3.0f, 1.0f};
  divide_fp32({f.data(), 2, DType::kFloat32}, 4);
  EXPECT_EQ(f[0], 0.75f);
  EXPECT_EQ(f[1], 0.25f);
}

}  // namespace
}  // namespace shardwise
