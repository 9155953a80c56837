// The device conversion of fp32 main params to and from bf16 / fp16 model params
// (mixed_precision_cuda.hpp, and DeviceShardMath::widen / narrow that the distributed optimizers
// call) against the host path's converters (optim::copy_main_to_model / copy_model_to_main):
// bit for bit, on values that exercise every rounding case (ties to even, overflow to infinity,
// subnormals, signed zeros, infinities, NaN).
#include "shardwise/cuda/mixed_precision_cuda.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "cuda_test_support.hpp"
#include "shardwise/cuda/device_buffer.hpp"
#include "shardwise/cuda/device_memory.hpp"
#include "shardwise/optim/mixed_precision.hpp"

namespace shardwise::cuda {
namespace {

// Normal values at several scales, then the edge cases of both 16-bit formats.
std::vector<float> conversion_inputs() {
  std::vector<float> v = test::normal_values(5000, 0.05f, 11);
  for (float x : test::normal_values(3000, 3000.0f, 12)) v.push_back(x);
  const float inf = std::numeric_limits<float>::infinity();
  const float edges[] = {0.0f,
                         -0.0f,
                         inf,
                         -inf,
                         std::numeric_limits<float>::quiet_NaN(),
                         -std::numeric_limits<float>::quiet_NaN(),
                         std::numeric_limits<float>::denorm_min(),
                         1e-40f,
                         6.0e-8f,   // fp16 subnormal
                         65504.0f,  // fp16 max
                         65520.0f,  // rounds to fp16 infinity
                         -70000.0f,
                         3.0e38f,                          // bf16 rounds up to infinity
                         1.0f + std::ldexp(1.0f, -8),      // bf16 tie, rounds to even (down)
                         1.0f + 3 * std::ldexp(1.0f, -8),  // bf16 tie, rounds up
                         1.0f + std::ldexp(1.0f, -11),     // fp16 tie
                         1.0f + 3 * std::ldexp(1.0f, -11)};
  v.insert(v.end(), std::begin(edges), std::end(edges));
  return v;
}

std::vector<std::uint16_t> host_narrow(const std::vector<float>& main, DType dtype) {
  std::vector<std::uint16_t> out(main.size());
  optim::copy_main_to_model(main, {out.data(), static_cast<std::int64_t>(out.size()), dtype});
  return out;
}

std::vector<float> host_widen(std::vector<std::uint16_t> model, DType dtype) {
  std::vector<float> out(model.size());
  optim::copy_model_to_main({model.data(), static_cast<std::int64_t>(model.size()), dtype}, out);
  return out;
}

class MixedPrecisionCuda : public ::testing::TestWithParam<DType> {};

TEST_P(MixedPrecisionCuda, NarrowAndWidenMatchTheHostConverters) {
  SW_SKIP_WITHOUT_GPU();
  const DType dtype = GetParam();
  const std::vector<float> main = conversion_inputs();
  const auto n = static_cast<std::int64_t>(main.size());
  const DeviceBuffer main_device = to_device(main);
  DeviceBuffer model_device(main.size() * sizeof(std::uint16_t));
  const TensorView model{model_device.data(), n, dtype, 0};

  narrow_from_main_device(main_device.as<float>(), model);
  const std::vector<std::uint16_t> narrowed = to_host<std::uint16_t>(model_device, main.size());
  const std::vector<std::uint16_t> expected = host_narrow(main, dtype);
  EXPECT_EQ(test::first_bit_difference(narrowed, expected), "");

  DeviceBuffer widened_device(main.size() * sizeof(float));
  widen_to_main_device(model, widened_device.as<float>());
  const std::vector<float> widened = to_host<float>(widened_device, main.size());
  EXPECT_EQ(test::first_bit_difference(widened, host_widen(expected, dtype)), "");
}

TEST_P(MixedPrecisionCuda, DeviceShardMathConvertsOddSizedSlices) {
  SW_SKIP_WITHOUT_GPU();
  const DType dtype = GetParam();
  const DeviceShardMath math(0);
  const std::vector<float> main = test::normal_values(1001, 0.3f, 21);
  const DeviceBuffer main_device = to_device(main);
  DeviceBuffer model_device(main.size() * sizeof(std::uint16_t));
  // A slice at an odd element offset, as an owned shard of a bucket can be.
  const TensorView whole{model_device.data(), static_cast<std::int64_t>(main.size()), dtype, 0};
  const TensorView slice = whole.slice(1, 999);
  math.narrow(main_device.as<float>() + 1, slice);
  const std::vector<std::uint16_t> all = to_host<std::uint16_t>(model_device, main.size());
  const std::vector<std::uint16_t> got(all.begin() + 1, all.begin() + 1000);
  const std::vector<std::uint16_t> expected =
      host_narrow(std::vector<float>(main.begin() + 1, main.begin() + 1000), dtype);
  EXPECT_EQ(test::first_bit_difference(got, expected), "");
}

TEST(MixedPrecisionCudaErrors, HostViewsAndOtherDtypesAreRefused) {
  SW_SKIP_WITHOUT_GPU();
  std::vector<std::uint16_t> host(4);
  DeviceBuffer main(4 * sizeof(float));
  EXPECT_THROW(narrow_from_main_device(main.as<float>(), {host.data(), 4, DType::kBFloat16}),
               InvalidArgument);
  DeviceBuffer bytes(4);
  EXPECT_THROW(widen_to_main_device({bytes.data(), 4, DType::kUInt8, 0}, main.as<float>()),
               InvalidArgument);
  const DeviceShardMath math(0);
  EXPECT_THROW(math.narrow(main.as<float>(), {host.data(), 4, DType::kBFloat16}), InvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(ModelDTypes, MixedPrecisionCuda,
                         ::testing::Values(DType::kBFloat16, DType::kFloat16),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return std::string(dtype_name(info.param));
                         });

}  // namespace
}  // namespace shardwise::cuda
