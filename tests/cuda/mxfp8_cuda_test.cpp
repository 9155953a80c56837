// The CUDA MXFP8 kernels against the CPU codec (core/mxfp8.hpp): bit-identical data, scales and
// dequantized values, in both scale layouts and both scale rules, on random inputs of every input
// dtype, with partial last blocks, zero blocks, tiny (E4M3-subnormal) blocks and NaN/Inf elements.
// Skips when no GPU is present.
#include "shardwise/cuda/mxfp8_cuda.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "shardwise/core/float_convert.hpp"
#include "shardwise/core/mxfp8.hpp"

namespace shardwise::cuda {
namespace {

#define SKIP_WITHOUT_GPU() \
  if (!gpu_available()) GTEST_SKIP() << "no CUDA device: cudaGetDeviceCount() found none"

// Row r of the tensor has magnitudes around 2^(r % 40 - 25), so blocks span normal, E4M3-subnormal
// and clamped-scale ranges; a few elements are -0, NaN or +-Inf, and row 3 is all zeros.
std::vector<float> random_values(std::int64_t rows, std::int64_t cols, std::uint32_t seed,
                                 bool specials) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(static_cast<std::size_t>(rows * cols));
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < cols; ++c) {
      float x = normal(rng) * std::ldexp(1.0f, static_cast<int>(r % 40) - 25);
      if (r == 3) x = 0.0f;
      if ((r * cols + c) % 229 == 3) x = -0.0f;
      if (specials && (r * cols + c) % 211 == 17) x = std::numeric_limits<float>::quiet_NaN();
      if (specials && (r * cols + c) % 223 == 41) x = (c % 2 ? -1.0f : 1.0f) * INFINITY;
      v[static_cast<std::size_t>(r * cols + c)] = x;
    }
  }
  return v;
}

struct Input {
  std::vector<float> f32;
  std::vector<std::uint16_t> half;  // bf16 or fp16 bits
  DType dtype;
  TensorView view() {
    if (dtype == DType::kFloat32) return {f32.data(), static_cast<std::int64_t>(f32.size()), dtype};
    return {half.data(), static_cast<std::int64_t>(half.size()), dtype};
  }
};

Input make_input(DType dtype, const std::vector<float>& values) {
  Input in{values, {}, dtype};
  if (dtype == DType::kBFloat16) {
    for (float f : values) in.half.push_back(float_to_bf16(f));
  } else if (dtype == DType::kFloat16) {
    for (float f : values) in.half.push_back(float_to_fp16(f));
  }
  return in;
}

class Mxfp8CudaTest : public ::testing::TestWithParam<DType> {};

constexpr Mxfp8ScaleLayout kLayouts[] = {Mxfp8ScaleLayout::kRowMajor,
                                         Mxfp8ScaleLayout::kSwizzled128x4};

TEST_P(Mxfp8CudaTest, QuantizeMatchesCpuCodecBitForBit) {
  SKIP_WITHOUT_GPU();
  const DType dtype = GetParam();
  // Whole blocks in every row (vectorised kernel: 64x256, 2049x96, 1x32), a partial last block
  // (cols % 32 != 0), a single short block, many rows (general kernel).
  const std::vector<std::pair<std::int64_t, std::int64_t>> shapes = {
      {64, 256}, {37, 80}, {5, 7}, {1, 1}, {300, 1000}, {2049, 96}, {1, 32}};
  std::uint32_t seed = 1;
  for (const auto& [rows, cols] : shapes) {
    for (bool specials : {false, true}) {
      for (Mxfp8ScaleLayout layout : kLayouts) {
        for (Mxfp8ScaleRule rule : {Mxfp8ScaleRule::kCeil, Mxfp8ScaleRule::kFloor}) {
          SCOPED_TRACE(::testing::Message()
                       << dtype_name(dtype) << " [" << rows << ", " << cols
                       << "] specials=" << specials << " layout " << static_cast<int>(layout)
                       << " rule " << static_cast<int>(rule));
          Input in = make_input(dtype, random_values(rows, cols, seed++, specials));
          const Mxfp8Options options{rule, layout, 1};
          const Mxfp8Tensor cpu = quantize_mxfp8(in.view(), rows, cols, options);
          const Mxfp8Tensor gpu = quantize_mxfp8_cuda(in.view(), rows, cols, options);
          ASSERT_EQ(gpu.scale, cpu.scale);
          ASSERT_EQ(gpu.data, cpu.data);
        }
      }
    }
  }
}

// Every E4M3 code (NaNs included) with scales over the whole E8M0 range, 0 and 0xFF included,
// dequantized on the GPU and the CPU; element-by-element equal bits.
void expect_dequantize_matches_cpu(std::int64_t rows, std::int64_t cols, DType out_dtype,
                                   Mxfp8ScaleLayout layout) {
  std::mt19937 rng(static_cast<std::uint32_t>(rows * 7 + cols));
  std::uniform_int_distribution<int> byte(0, 255);
  Mxfp8Tensor t = Mxfp8Tensor::allocate(rows, cols, layout);
  for (auto& b : t.data) b = static_cast<std::uint8_t>(byte(rng));
  for (auto& s : t.scale) s = static_cast<std::uint8_t>(byte(rng));
  t.scale[0] = 0;
  t.scale[1] = 0xff;
  const std::size_t n = static_cast<std::size_t>(rows * cols);
  const std::size_t size = dtype_size(out_dtype);
  std::vector<std::byte> cpu(n * size), gpu(n * size);
  dequantize_mxfp8_into(t.view(), {cpu.data(), rows * cols, out_dtype});
  dequantize_mxfp8_cuda(t.view(), {gpu.data(), rows * cols, out_dtype});
  // NaN results too: the CPU codec makes them the quiet NaN with the code's sign on every ISA.
  const std::int64_t blocks_per_row = (cols + 31) / 32;
  for (std::size_t i = 0; i < n; ++i) {
    const auto element = static_cast<std::int64_t>(i);
    const auto block = static_cast<std::size_t>(
        mxfp8_scale_offset(layout, element / cols, element % cols / 32, blocks_per_row));
    ASSERT_EQ(std::memcmp(cpu.data() + i * size, gpu.data() + i * size, size), 0)
        << "element " << i << " data 0x" << std::hex << int{t.data[i]} << " scale 0x"
        << int{t.scale[block]};
  }
}

TEST_P(Mxfp8CudaTest, DequantizeMatchesCpuCodecBitForBit) {
  SKIP_WITHOUT_GPU();
  // 200 columns: a partial last block (general kernel); 256 and 32: whole blocks (vectorised).
  for (const auto& [rows, cols] :
       std::vector<std::pair<std::int64_t, std::int64_t>>{{129, 200}, {67, 256}, {3, 32}}) {
    for (Mxfp8ScaleLayout layout : kLayouts) {
      SCOPED_TRACE(::testing::Message()
                   << "[" << rows << ", " << cols << "] layout " << static_cast<int>(layout));
      expect_dequantize_matches_cpu(rows, cols, GetParam(), layout);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, Mxfp8CudaTest,
                         ::testing::Values(DType::kFloat32, DType::kBFloat16, DType::kFloat16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(Mxfp8Cuda, DeviceCountNeverThrows) {
  const int count = device_count();
  EXPECT_GE(count, 0);
  EXPECT_EQ(gpu_available(), count > 0);
  if (count == 0) {
    std::vector<float> x(64, 1.0f);
    EXPECT_THROW(quantize_mxfp8_cuda({x.data(), 64, DType::kFloat32}, 2, 32), CudaError);
  }
}

TEST(Mxfp8Cuda, RejectsBadArgumentsWithoutTouchingTheGpu) {
  std::vector<std::int32_t> ints(64);
  EXPECT_THROW(quantize_mxfp8_cuda({ints.data(), 64, DType::kInt32}, 2, 32), InvalidArgument);
  std::vector<float> x(64);
  EXPECT_THROW(quantize_mxfp8_cuda({x.data(), 64, DType::kFloat32}, 3, 32), ShapeError);
}

}  // namespace
}  // namespace shardwise::cuda
