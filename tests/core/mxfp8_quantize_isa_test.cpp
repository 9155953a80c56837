// MXFP8 quantize edge cases on every ISA level the CPU offers, fp32 and bf16 inputs, both scale
// rules: each level must give the baseline level's bytes (mxfp8_test.cpp checks the baseline
// against an independent reference). Blocks are built around a chosen scale 2^k so that they hit
// exact E4M3 rounding ties, E4M3 subnormals, the saturation at 448 * scale, the kCeil carry at
// amax mantissa 1.75, NaN / Inf, zeros and fp32 subnormals. Rows hold 19 full blocks and a
// partial one, so the vector kernels see whole groups, a short group and a caller-padded block.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "every_isa_level.hpp"
#include "shardwise/core/cpu_isa.hpp"
#include "shardwise/core/float_convert.hpp"
#include "shardwise/core/mxfp8.hpp"

namespace shardwise {
namespace {

constexpr std::int64_t kRowElements = 32 * 19 + 13;
constexpr int kKinds = 8;

// E4M3 magnitudes at a rounding tie or next to one, times 2^k: midpoints between neighbouring
// codes in the normal range (1 + (2j + 1) / 16) * 2^e and in the subnormal range
// (2j + 1) * 2^-10, each moved by -1, 0 or +1 fp32 ulp.
float near_tie(std::mt19937& gen, int k) {
  const int mode = static_cast<int>(gen() % 3);
  float t;
  if (gen() % 3 == 0) {
    t = std::ldexp(static_cast<float>(2 * (gen() % 8) + 1), -10);
  } else {
    const int e = -6 + static_cast<int>(gen() % 15);  // 2^-6 .. 2^8
    t = std::ldexp(1.0f + static_cast<float>(2 * (gen() % 8) + 1) / 16.0f, e);
    if (t > 448.0f) t = 440.0f;
  }
  if (mode == 1) t = std::nextafter(t, 0.0f);
  if (mode == 2) t = std::nextafter(t, 1000.0f);
  return std::ldexp(t, k);
}

// One block of 32 values of the given kind around the scale 2^k.
void fill_block(std::mt19937& gen, int kind, int k, float* x) {
  std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
  const auto sign = [&] { return gen() % 2 ? -1.0f : 1.0f; };
  for (int i = 0; i < 32; ++i) {
    switch (kind) {
      case 0:  // spread over 24 binades below 448 * 2^k: normal and subnormal E4M3 codes
        x[i] = sign() * std::ldexp(mantissa(gen), k + 8 - static_cast<int>(gen() % 24));
        break;
      case 1:  // ties next to an element at exactly 448 * 2^k (so both rules pick 2^k)
        x[i] = sign() * near_tie(gen, k);
        break;
      case 2:  // top of the block in [448, 512) * 2^k: the floor rule saturates
        x[i] = sign() * std::ldexp(448.0f + static_cast<float>(gen() % 64), k);
        break;
      case 3:  // zeros of both signs, a few tiny values
        x[i] = gen() % 4 ? sign() * 0.0f : sign() * std::ldexp(1.0f, k - 20);
        break;
      case 4:  // all zero
        x[i] = 0.0f;
        break;
      case 5:  // fp32 subnormals (the scale byte clamps)
        x[i] = sign() * std::ldexp(mantissa(gen), -127 - static_cast<int>(gen() % 20));
        break;
      default:  // amax mantissa just below / at / above 1.75 (the kCeil carry)
        x[i] = sign() * std::ldexp(mantissa(gen), k);
        break;
    }
  }
  if (kind == 1) x[gen() % 32] = sign() * std::ldexp(448.0f, k);
  if (kind == 6 || kind == 7) {
    // fp32 and bf16 neighbours of the 1.75 mantissa (bf16 keeps the top 7 bits).
    const std::uint32_t mantissas[] = {0x5fffffu, 0x600000u, 0x600001u, 0x5f0000u, 0x610000u};
    const std::uint32_t m = mantissas[gen() % 5];
    x[gen() % 32] = sign() * std::bit_cast<float>(0x3f800000u | m) * std::ldexp(2.0f, k);
  }
  if (kind == 7 || gen() % 16 == 0) {  // NaN / Inf somewhere in the block
    const float specials[] = {std::numeric_limits<float>::quiet_NaN(),
                              std::numeric_limits<float>::infinity(),
                              -std::numeric_limits<float>::infinity()};
    x[gen() % 32] = specials[gen() % 3];
  }
}

std::vector<float> edge_rows(std::int64_t rows) {
  std::mt19937 gen(29);
  std::vector<float> x(static_cast<std::size_t>(rows * kRowElements));
  float block[32];
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < kRowElements; c += 32) {
      // Scales from near the bottom to near the top of the fp32 range.
      const int k = -135 + static_cast<int>(gen() % 255);
      const int kind = static_cast<int>(gen() % kKinds);
      fill_block(gen, kind, std::max(-140, std::min(k, 118)), block);
      for (std::int64_t i = c; i < std::min(c + 32, kRowElements); ++i)
        x[static_cast<std::size_t>(r * kRowElements + i)] = block[i - c];
    }
  }
  return x;
}

void expect_every_level_matches_baseline(const void* x, DType dtype, std::int64_t rows) {
  const std::int64_t n = rows * kRowElements;
  for (auto rule : {Mxfp8ScaleRule::kCeil, Mxfp8ScaleRule::kFloor}) {
    auto quantize = [&] {
      return quantize_mxfp8({const_cast<void*>(x), n, dtype}, rows, kRowElements,
                            {rule, Mxfp8ScaleLayout::kRowMajor, 1});
    };
    test::compare_every_isa_level_with_baseline(
        quantize, [&](IsaLevel level, const Mxfp8Tensor& got, const Mxfp8Tensor& baseline) {
          const auto rule_name = rule == Mxfp8ScaleRule::kCeil ? "ceil" : "floor";
          ASSERT_EQ(got.scale, baseline.scale) << isa_level_name(level) << " " << rule_name;
          for (std::size_t i = 0; i < got.data.size(); ++i) {
            ASSERT_EQ(got.data[i], baseline.data[i])
                << isa_level_name(level) << " " << rule_name << " " << dtype_name(dtype)
                << " element " << i << " scale byte "
                << int(baseline.scale[i / kRowElements * got.geometry().blocks_per_row +
                                      i % kRowElements / 32]);
          }
        });
  }
}

TEST(Mxfp8QuantizeIsaLevels, Fp32EdgeBlocksGiveTheBaselineBytes) {
  const std::int64_t rows = 400;
  const std::vector<float> x = edge_rows(rows);
  expect_every_level_matches_baseline(x.data(), DType::kFloat32, rows);
}

TEST(Mxfp8QuantizeIsaLevels, Bf16EdgeBlocksGiveTheBaselineBytes) {
  const std::int64_t rows = 400;
  const std::vector<float> x = edge_rows(rows);
  std::vector<std::uint16_t> xb(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) xb[i] = float_to_bf16(x[i]);
  expect_every_level_matches_baseline(xb.data(), DType::kBFloat16, rows);
}

}  // namespace
}  // namespace shardwise
