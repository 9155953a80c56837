// The MXFP8 kernels on every ISA level the CPU offers give the bytes of the baseline level (which
// mxfp8_test.cpp checks against an independent reference): both scale rules, both scale
// layouts, every input and output dtype, with NaN / Inf / subnormal blocks and a partial block.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "every_isa_level.hpp"
#include "shardwise/core/cpu_isa.hpp"
#include "shardwise/core/float_convert.hpp"
#include "shardwise/core/fp8.hpp"
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
  const Mxfp8Tensor q =
      quantize_mxfp8({const_cast<void*>(x), n, dtype}, kRows, kCols, {rule, layout, 1});
  Outputs out{q.data, q.scale, std::vector<float>(std::size_t(n)),
              std::vector<std::uint16_t>(std::size_t(n)),
              std::vector<std::uint16_t>(std::size_t(n))};
  dequantize_mxfp8_into(q.view(), {out.f32.data(), n, DType::kFloat32}, 1);
  dequantize_mxfp8_into(q.view(), {out.bf16.data(), n, DType::kBFloat16}, 1);
  dequantize_mxfp8_into(q.view(), {out.f16.data(), n, DType::kFloat16}, 1);
  return out;
}

TEST(Mxfp8IsaLevels, EveryLevelGivesTheBaselineBytes) {
  const std::vector<float> x = input();
  std::vector<std::uint16_t> xb(x.size()), xh(x.size());
  for (std::size_t i = 0; i < x.size(); ++i)
    xb[i] = float_to_bf16(x[i]), xh[i] = float_to_fp16(x[i]);
  const std::pair<const void*, DType> inputs[] = {
      {x.data(), DType::kFloat32}, {xb.data(), DType::kBFloat16}, {xh.data(), DType::kFloat16}};
  for (auto rule : {Mxfp8ScaleRule::kCeil, Mxfp8ScaleRule::kFloor}) {
    for (auto layout : {Mxfp8ScaleLayout::kRowMajor, Mxfp8ScaleLayout::kSwizzled128x4}) {
      for (const auto& [ptr, dtype] : inputs) {
        test::compare_every_isa_level_with_baseline(
            [&, ptr = ptr, dtype = dtype] { return run(ptr, dtype, rule, layout); },
            [&, dtype = dtype](IsaLevel level, const Outputs& got, const Outputs& baseline) {
              EXPECT_TRUE(got.data == baseline.data && got.scale == baseline.scale)
                  << isa_level_name(level) << " quantize " << dtype_name(dtype);
              EXPECT_TRUE(got.bf16 == baseline.bf16 && got.f16 == baseline.f16)
                  << isa_level_name(level) << " dequantize from " << dtype_name(dtype);
              // fp32 outputs may hold NaN: compare bits.
              EXPECT_EQ(0, std::memcmp(got.f32.data(), baseline.f32.data(), got.f32.size() * 4))
                  << isa_level_name(level) << " dequantize fp32 from " << dtype_name(dtype);
            });
      }
    }
  }
}

// bf16 blocks with every amax exponent (so every scale byte, the fallback range included) whose
// other elements sit at random exponents below it: normal and subnormal E4M3 codes, rounding
// ties, bf16 subnormals, zeros, and some NaN / Inf.
std::vector<std::uint16_t> bf16_blocks_over_every_exponent() {
  std::mt19937 gen(17);
  std::vector<std::uint16_t> x;
  for (int round = 0; round < 8; ++round) {
    for (std::uint32_t amax_e = 0; amax_e < 255; ++amax_e) {
      const std::uint32_t amax = (amax_e << 7) | (gen() & 0x7f);
      x.push_back(static_cast<std::uint16_t>(amax | (gen() & 0x8000)));
      for (int i = 1; i < 32; ++i) {
        const std::uint32_t below = std::min<std::uint32_t>(amax_e, gen() % 24);
        std::uint32_t mantissa = gen() & 0x7f;
        if (i % 5 == 0) mantissa = (mantissa & 0x60) | 0x08 | (gen() & 0x10);  // RNE ties
        std::uint32_t bits = ((amax_e - below) << 7) | mantissa;
        if (bits > amax) bits = amax;
        if (i == 7) bits = 0;
        if (i == 9 && round == 3) bits = 0x7f80;   // Inf
        if (i == 11 && round == 5) bits = 0x7fc1;  // NaN
        x.push_back(static_cast<std::uint16_t>(bits | (gen() & 0x8000)));
      }
    }
  }
  return x;
}

TEST(Mxfp8IsaLevels, Bf16QuantizeOverEveryScaleExponent) {
  const std::vector<std::uint16_t> x = bf16_blocks_over_every_exponent();
  const std::int64_t rows = static_cast<std::int64_t>(x.size()) / 64;
  for (auto rule : {Mxfp8ScaleRule::kCeil, Mxfp8ScaleRule::kFloor}) {
    auto quantize = [&] {
      return quantize_mxfp8({const_cast<std::uint16_t*>(x.data()), rows * 64, DType::kBFloat16},
                            rows, 64, {rule, Mxfp8ScaleLayout::kRowMajor, 1});
    };
    test::compare_every_isa_level_with_baseline(
        quantize, [&](IsaLevel level, const Mxfp8Tensor& got, const Mxfp8Tensor& baseline) {
          for (std::size_t i = 0; i < got.data.size(); ++i) {
            ASSERT_EQ(got.data[i], baseline.data[i])
                << isa_level_name(level) << " element " << i << " bf16 " << std::hex << x[i]
                << " scale " << int(baseline.scale[i / 32]);
          }
          EXPECT_EQ(got.scale, baseline.scale) << isa_level_name(level);
        });
  }
}

// fp32 blocks whose largest element is 448 * 2^k, for every k an fp32 block can have: the other
// elements are 2^k times every E4M3 value, every midpoint between neighbouring codes (the RNE
// ties, normal and subnormal, and the carries into the next binade) and the fp32 neighbours of
// each midpoint, with alternating signs. Small k make the scaled elements fp32 subnormals. One
// row per k (17 blocks: two full groups of the AVX2 kernel and a partial one).
struct F32Rows {
  std::vector<float> x;
  std::int64_t rows = 0, cols = 0;
};
F32Rows f32_blocks_with_every_code_and_tie() {
  std::vector<float> targets;
  for (int code = 0; code <= kE4M3MaxCode; ++code) {
    const float value = e4m3_to_float(static_cast<e4m3_bits>(code));
    targets.push_back(value);
    if (code == kE4M3MaxCode) break;
    const float midpoint = 0.5f * (value + e4m3_to_float(static_cast<e4m3_bits>(code + 1)));
    targets.push_back(midpoint);
    targets.push_back(std::nextafter(midpoint, 0.0f));
    targets.push_back(std::nextafter(midpoint, 1000.0f));
  }
  F32Rows out;
  for (int k = -149; k <= 119; ++k, ++out.rows) {
    for (std::size_t t = 0; t < targets.size(); t += 31) {
      out.x.push_back(std::ldexp(448.0f, k));
      for (std::size_t i = t; i < t + 31; ++i) {
        const float target = i < targets.size() ? targets[i] : 0.0f;
        out.x.push_back(std::ldexp(i % 2 == 0 ? target : -target, k));
      }
    }
  }
  out.cols = static_cast<std::int64_t>(out.x.size()) / out.rows;
  return out;
}

TEST(Mxfp8IsaLevels, F32QuantizeOfEveryCodeAndTieOverEveryScale) {
  const auto [x, rows, cols] = f32_blocks_with_every_code_and_tie();
  ASSERT_EQ(cols, 17 * 32);
  for (auto rule : {Mxfp8ScaleRule::kCeil, Mxfp8ScaleRule::kFloor}) {
    auto quantize = [&] {
      return quantize_mxfp8({const_cast<float*>(x.data()), rows * cols, DType::kFloat32}, rows,
                            cols, {rule, Mxfp8ScaleLayout::kRowMajor, 1});
    };
    test::compare_every_isa_level_with_baseline(
        quantize, [&](IsaLevel level, const Mxfp8Tensor& got, const Mxfp8Tensor& baseline) {
          for (std::size_t i = 0; i < got.data.size(); ++i) {
            ASSERT_EQ(got.data[i], baseline.data[i])
                << isa_level_name(level) << " element " << i << " fp32 " << x[i] << " scale "
                << int(baseline.scale[i / 32]);
          }
          EXPECT_EQ(got.scale, baseline.scale) << isa_level_name(level);
        });
  }
}

TEST(Mxfp8IsaLevels, DequantizeEveryCodeWithEveryScaleByte) {
  // Row r: every code 0..255 once, all 8 blocks with scale byte r (NaN scale 0xFF included).
  Mxfp8Tensor q = Mxfp8Tensor::allocate(256, 256);
  for (std::int64_t r = 0; r < 256; ++r) {
    for (std::int64_t c = 0; c < 256; ++c) q.data[std::size_t(r * 256 + c)] = std::uint8_t(c);
    for (std::int64_t b = 0; b < 8; ++b) q.scale[std::size_t(r * 8 + b)] = std::uint8_t(r);
  }
  const std::int64_t n = 256 * 256;
  auto dequantize = [&](DType dtype) {
    std::vector<std::uint8_t> out(std::size_t(n) * dtype_size(dtype));
    dequantize_mxfp8_into(q.view(), {out.data(), n, dtype}, 1);
    return out;
  };
  for (DType dtype : {DType::kBFloat16, DType::kFloat16, DType::kFloat32}) {
    std::vector<std::uint8_t> baseline;
    {
      ScopedIsaLevel forced(IsaLevel::kBaseline);
      baseline = dequantize(dtype);
    }
    // The baseline itself: e4m3 * scale in fp32, then rounded to the output type.
    if (dtype == DType::kBFloat16) {
      for (std::int64_t i = 0; i < n; i += 97) {
        const float want =
            e4m3_to_float(q.data[std::size_t(i)]) * e8m0_to_float(q.scale[std::size_t(i / 32)]);
        std::uint16_t got;
        std::memcpy(&got, baseline.data() + 2 * i, 2);
        if (std::isnan(want)) {
          EXPECT_TRUE(std::isnan(bf16_to_float(got))) << i;
        } else {
          EXPECT_EQ(got, float_to_bf16(want)) << i;
        }
      }
    }
    for (IsaLevel level : supported_isa_levels()) {
      ScopedIsaLevel forced(level);
      const std::vector<std::uint8_t> got = dequantize(dtype);
      ASSERT_EQ(got.size(), baseline.size());
      for (std::size_t i = 0; i < got.size(); i += dtype_size(dtype)) {
        ASSERT_EQ(0, std::memcmp(got.data() + i, baseline.data() + i, dtype_size(dtype)))
            << isa_level_name(level) << " " << dtype_name(dtype) << " code "
            << (i / dtype_size(dtype)) % 256 << " scale byte " << i / dtype_size(dtype) / 256;
      }
    }
  }
}

// Long rows (many 64-block work items, so the kernels run over long runs of blocks and the
// software prefetch reaches past the end of the input) with a partial last block of every odd
// size, on 1 and 2 threads: every level gives the baseline's bytes.
TEST(Mxfp8IsaLevels, LongRowsWithOddTailsGiveTheBaselineBytes) {
  std::mt19937 gen(23);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  for (std::int64_t tail : {1, 7, 17, 31}) {
    const std::int64_t rows = 3, cols = 32 * 300 + tail, n = rows * cols;
    std::vector<float> x(static_cast<std::size_t>(n));
    for (auto& v : x) v = normal(gen);
    x[static_cast<std::size_t>(cols + 5000)] = std::numeric_limits<float>::infinity();
    x[static_cast<std::size_t>(n - 1)] = 1e-30f;  // in the tail block
    std::vector<std::uint16_t> xb(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) xb[i] = float_to_bf16(x[i]);
    for (auto rule : {Mxfp8ScaleRule::kCeil, Mxfp8ScaleRule::kFloor}) {
      for (int threads : {1, 2}) {
        for (const auto& [ptr, dtype] : {std::pair<const void*, DType>{x.data(), DType::kFloat32},
                                         {xb.data(), DType::kBFloat16}}) {
          auto quantize = [&] {
            return quantize_mxfp8({const_cast<void*>(ptr), n, dtype}, rows, cols,
                                  {rule, Mxfp8ScaleLayout::kRowMajor, threads});
          };
          Mxfp8Tensor baseline;
          std::vector<std::uint16_t> baseline_bf16(x.size());
          {
            ScopedIsaLevel forced(IsaLevel::kBaseline);
            baseline = quantize();
            dequantize_mxfp8_into(baseline.view(), {baseline_bf16.data(), n, DType::kBFloat16},
                                  threads);
          }
          for (IsaLevel level : supported_isa_levels()) {
            ScopedIsaLevel forced(level);
            const Mxfp8Tensor got = quantize();
            EXPECT_TRUE(got.data == baseline.data && got.scale == baseline.scale)
                << isa_level_name(level) << " " << dtype_name(dtype) << " tail " << tail;
            std::vector<std::uint16_t> got_bf16(x.size());
            dequantize_mxfp8_into(got.view(), {got_bf16.data(), n, DType::kBFloat16}, threads);
            EXPECT_EQ(got_bf16, baseline_bf16) << isa_level_name(level) << " tail " << tail;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace shardwise
