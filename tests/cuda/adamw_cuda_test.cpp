// The fused AdamW kernel against optim::adamw_update on the same inputs. Tolerance: none. Both
// sides evaluate the same IEEE-754 fp32 operations (multiply, add, sqrt, divide, each rounded to
// nearest even, no FMA contraction, denormals kept) in the same order on the same scalars, and
// IEEE fixes every such result, so params and moments must match bit for bit; bf16 / fp16 grads
// widen exactly, and the model copy is the CPU's float_to_bf16 / float_to_fp16 of the result.
// Covers every grad dtype x model-copy dtype, the vectorised kernel (aligned, numel % 4 == 0),
// its scalar tail and the all-scalar kernel (pointers one element off alignment), three steps
// with bias correction. Skips when no GPU is present.
#include "shardwise/cuda/adamw_cuda.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "cuda_test_support.hpp"
#include "shardwise/core/float_convert.hpp"
#include "shardwise/cuda/device_buffer.hpp"

namespace shardwise::cuda {
namespace {

using test::first_bit_difference;

// Host values of one tensor set; grads are the values the CPU sees (16-bit ones already widened).
struct HostState {
  std::vector<float> param, grad, exp_avg, exp_avg_sq;
  std::vector<std::uint16_t> grad16;  // bf16 / fp16 bits of grad
};

HostState make_state(std::size_t n, DType grad_dtype, std::uint32_t seed) {
  HostState h;
  h.param = test::normal_values(n, 0.5f, seed);
  h.grad = test::normal_values(n, 1e-2f, seed + 1);
  h.exp_avg = test::normal_values(n, 1e-3f, seed + 2);
  h.exp_avg_sq = test::normal_values(n, 1e-4f, seed + 3);
  for (float& v : h.exp_avg_sq) v = v * v;  // second moments are >= 0
  for (std::size_t i = 0; i < n; i += 97) h.grad[i] = 0.0f;
  for (std::size_t i = 5; i < n; i += 101) h.grad[i] *= 1e-18f;  // g^2 an fp32 denormal
  for (float& g : h.grad) {
    if (grad_dtype == DType::kBFloat16) {
      h.grad16.push_back(float_to_bf16(g));
      g = bf16_to_float(h.grad16.back());
    } else if (grad_dtype == DType::kFloat16) {
      h.grad16.push_back(float_to_fp16(g));
      g = fp16_to_float(h.grad16.back());
    }
  }
  return h;
}

// Device copies `offset` elements into their allocations (offset 1 breaks 16-byte alignment).
struct DeviceState {
  DeviceBuffer param, grad, exp_avg, exp_avg_sq, model;
  std::size_t offset;
  template <typename T>
  static DeviceBuffer upload(const std::vector<T>& v, std::size_t offset) {
    std::vector<T> padded(offset, T{});
    padded.insert(padded.end(), v.begin(), v.end());
    return to_device(padded);
  }
  template <typename T>
  static T* at(const DeviceBuffer& b, std::size_t offset) {
    return b.as<T>() + offset;
  }
};

std::vector<std::uint16_t> narrow_all(const std::vector<float>& v, DType dtype) {
  std::vector<std::uint16_t> out;
  for (float x : v) out.push_back(dtype == DType::kBFloat16 ? float_to_bf16(x) : float_to_fp16(x));
  return out;
}

template <typename T>
std::vector<T> download(const DeviceBuffer& b, std::size_t offset, std::size_t n) {
  std::vector<T> all = to_host<T>(b, offset + n);
  return std::vector<T>(all.begin() + static_cast<std::ptrdiff_t>(offset), all.end());
}

void run_case(std::size_t n, DType grad_dtype, std::optional<DType> model_dtype, std::size_t offset,
              std::uint32_t seed) {
  SCOPED_TRACE(std::string("n=") + std::to_string(n) +
               " grad=" + std::string(dtype_name(grad_dtype)) +
               " model=" + (model_dtype ? std::string(dtype_name(*model_dtype)) : "none") +
               " offset=" + std::to_string(offset));
  HostState h = make_state(n, grad_dtype, seed);
  DeviceState d{DeviceState::upload(h.param, offset),
                grad_dtype == DType::kFloat32 ? DeviceState::upload(h.grad, offset)
                                              : DeviceState::upload(h.grad16, offset),
                DeviceState::upload(h.exp_avg, offset),
                DeviceState::upload(h.exp_avg_sq, offset),
                DeviceBuffer((n + offset) * 4),
                offset};
  AdamWDeviceTensors t;
  t.numel = static_cast<std::int64_t>(n);
  t.param = DeviceState::at<float>(d.param, offset);
  t.grad = grad_dtype == DType::kFloat32
               ? static_cast<const void*>(DeviceState::at<float>(d.grad, offset))
               : static_cast<const void*>(DeviceState::at<std::uint16_t>(d.grad, offset));
  t.grad_dtype = grad_dtype;
  t.exp_avg = DeviceState::at<float>(d.exp_avg, offset);
  t.exp_avg_sq = DeviceState::at<float>(d.exp_avg_sq, offset);
  if (model_dtype) {
    t.model_dtype = *model_dtype;
    t.model_param = *model_dtype == DType::kFloat32
                        ? static_cast<void*>(DeviceState::at<float>(d.model, offset))
                        : static_cast<void*>(DeviceState::at<std::uint16_t>(d.model, offset));
  }
  for (std::int64_t step = 1; step <= 3; ++step) {
    const auto s = optim::AdamWStepScalars::make(3e-3, 0.1, 0.9, 0.95, 1e-8, step);
    optim::adamw_update(s, h.param, h.grad, h.exp_avg, h.exp_avg_sq);
    adamw_update_device(s, t);
  }
  synchronize();
  EXPECT_EQ(first_bit_difference(download<float>(d.param, offset, n), h.param), "") << "param";
  EXPECT_EQ(first_bit_difference(download<float>(d.exp_avg, offset, n), h.exp_avg), "");
  EXPECT_EQ(first_bit_difference(download<float>(d.exp_avg_sq, offset, n), h.exp_avg_sq), "");
  if (!model_dtype) return;
  if (*model_dtype == DType::kFloat32) {
    EXPECT_EQ(first_bit_difference(download<float>(d.model, offset, n), h.param), "") << "model";
  } else {
    EXPECT_EQ(first_bit_difference(download<std::uint16_t>(d.model, offset, n),
                                   narrow_all(h.param, *model_dtype)),
              "")
        << "model";
  }
}

TEST(AdamWCuda, MatchesCpuUpdateBitForBit) {
  SW_SKIP_WITHOUT_GPU();
  std::uint32_t seed = 10;
  const std::optional<DType> models[] = {std::nullopt, DType::kFloat32, DType::kBFloat16,
                                         DType::kFloat16};
  for (DType grad : {DType::kFloat32, DType::kBFloat16, DType::kFloat16}) {
    for (const std::optional<DType>& model : models) {
      for (std::size_t n :
           {std::size_t{1}, std::size_t{7}, std::size_t{4096}, std::size_t{100003}}) {
        for (std::size_t offset : {std::size_t{0}, std::size_t{1}}) {
          run_case(n, grad, model, offset, seed++);
        }
      }
    }
  }
}

// More elements than 65536 blocks x 256 threads: the one-element-per-thread kernel (pointers off
// alignment) wraps its grid-stride loop.
TEST(AdamWCuda, GridStrideCoversLargeTensors) {
  SW_SKIP_WITHOUT_GPU();
  run_case((std::size_t{1} << 24) + 77, DType::kBFloat16, DType::kBFloat16, 1, 99);
}

// Argument checks happen before anything touches the device, so they run without a GPU too.
TEST(AdamWCuda, RejectsBadArguments) {
  const auto s = optim::AdamWStepScalars::make(1e-3, 0.0, 0.9, 0.999, 1e-8, 1);
  AdamWDeviceTensors t;
  t.numel = 4;
  EXPECT_THROW(adamw_update_device(s, t), InvalidArgument);  // no pointers
  float dummy[4] = {};
  t.param = t.exp_avg = t.exp_avg_sq = dummy;
  t.grad = dummy;
  t.grad_dtype = DType::kInt32;
  EXPECT_THROW(adamw_update_device(s, t), InvalidArgument);
  t.numel = -1;
  EXPECT_THROW(adamw_update_device(s, t), InvalidArgument);
  t.numel = 0;
  EXPECT_NO_THROW(adamw_update_device(s, t));
}

}  // namespace
}  // namespace shardwise::cuda
