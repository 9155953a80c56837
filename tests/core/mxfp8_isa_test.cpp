// The MXFP8 kernels on every ISA level the CPU offers give the bytes of the baseline level (which
// mxfp8_test.cpp checks against an independent reference): both scale rules, both scale
// layouts, every input and output dtype, with NaN / Inf / subnormal blocks and a partial block.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "shardwise/core/cpu_isa.hpp"
#include "shardwise/core/float_convert.hpp"
#include "shardwise/core/mxfp8.hpp"

namespace shardwise {
namespace {

constexpr std::int64_t kRows = 37, kCols = 200;  // 6 full blocks + a partial one per row

std::vector<float> input() {
  std::mt19937 gen(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-140, 60);
  std::vector<float> x(static_cast<std::size_t>(kRows * kCols));
  for (std::size_t i = 0; i < x.size(); ++i) {
    x[i] = std::ldexp(normal(gen), exponent(gen) / (i % 7 == 0 ? 1 : 8));
  }
  x[5] = std::numeric_limits<float>::quiet_NaN();
  x[300] = std::numeric_limits<float>::infinity();
  x[301] = -std::numeric_limits<float>::infinity();
  x[700] = 1e-40f;  // fp32 subnormal
  return x;
}

struct Outputs {
  std::vector<std::uint8_t> data, scale;
  std::vector<float> f32;
  std::vector<std::uint16_t> bf16, f16;
  bool operator==(const Outputs&) const = default;
};

// Quantizes `x` given as `dtype` and dequantizes the result to every output dtype.
Outputs run(const void* x, DType dtype, Mxfp8ScaleRule rule, Mxfp8ScaleLayout layout) {
  const std::int64_t n = kRows * kCols;
  const Mxfp8Tensor q = quantize_mxfp8({const_cast<void*>(x), n, dtype}, kRows, kCols,
                                       {rule, layout, 1});
  Outputs out{q.data, q.scale, std::vector<float>(std::size_t(n)),
              std::vector<std::uint16_t>(std::size_t(n)), std::vector<std::uint16_t>(std::size_t(n))};
  dequantize_mxfp8_into(q.view(), {out.f32.data(), n, DType::kFloat32}, 1);
  dequantize_mxfp8_into(q.view(), {out.bf16.data(), n, DType::kBFloat16}, 1);
  dequantize_mxfp8_into(q.view(), {out.f16.data(), n, DType::kFloat16}, 1);
  return out;
}

TEST(Mxfp8IsaLevels, EveryLevelGivesTheBaselineBytes) {
  const std::vector<float> x = input();
  std::vector<std::uint16_t> xb(x.size()), xh(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) xb[i] = float_to_bf16(x[i]), xh[i] = float_to_fp16(x[i]);
  const std::pair<const void*, DType> inputs[] = {
      {x.data(), DType::kFloat32}, {xb.data(), DType::kBFloat16}, {xh.data(), DType::kFloat16}};
  for (auto rule : {Mxfp8ScaleRule::kCeil, Mxfp8ScaleRule::kFloor}) {
    for (auto layout : {Mxfp8ScaleLayout::kRowMajor, Mxfp8ScaleLayout::kSwizzled128x4}) {
      for (const auto& [ptr, dtype] : inputs) {
        Outputs baseline;
        {
          ScopedIsaLevel forced(IsaLevel::kBaseline);
          baseline = run(ptr, dtype, rule, layout);
        }
        for (IsaLevel level : supported_isa_levels()) {
          ScopedIsaLevel forced(level);
          const Outputs got = run(ptr, dtype, rule, layout);
          EXPECT_TRUE(got.data == baseline.data && got.scale == baseline.scale)
              << isa_level_name(level) << " quantize " << dtype_name(dtype);
          EXPECT_TRUE(got.bf16 == baseline.bf16 && got.f16 == baseline.f16)
              << isa_level_name(level) << " dequantize from " << dtype_name(dtype);
          // fp32 outputs may hold NaN: compare bits.
          EXPECT_EQ(0, std::memcmp(got.f32.data(), baseline.f32.data(), got.f32.size() * 4))
              << isa_level_name(level) << " dequantize fp32 from " << dtype_name(dtype);
        }
      }
    }
  }
}

}  // namespace
}  // namespace shardwise
