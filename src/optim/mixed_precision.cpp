#include "shardwise/optim/mixed_precision.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "shardwise/core/error.hpp"

namespace shardwise::optim {

namespace {

void check_sizes(std::size_t main, std::int64_t model) {
  SW_REQUIRE(static_cast<std::int64_t>(main) == model, ShapeError, "main params have ", main,
             " elements but the model view has ", model);
}

}  // namespace

void copy_main_to_model(std::span<const float> main, std::span<bf16_bits> model) {
  check_sizes(main.size(), static_cast<std::int64_t>(model.size()));
  float_to_bf16_n(main.data(), model.data(), static_cast<std::int64_t>(main.size()));
}

void copy_model_to_main(std::span<const bf16_bits> model, std::span<float> main) {
  check_sizes(main.size(), static_cast<std::int64_t>(model.size()));
  bf16_to_float_n(model.data(), main.data(), static_cast<std::int64_t>(main.size()));
}

void copy_main_to_model(std::span<const float> main, const TensorView& model) {
  check_sizes(main.size(), model.numel);
  const auto n = static_cast<std::size_t>(model.numel);
  switch (model.dtype) {
    case DType::kBFloat16:
      copy_main_to_model(main, std::span<bf16_bits>(model.as<bf16_bits>(), n));
      return;
    case DType::kFloat16:
      float_to_fp16_n(main.data(), model.as<fp16_bits>(), model.numel);
      return;
    case DType::kFloat32:
      std::copy(main.begin(), main.end(), model.as<float>());
      return;
    default:
      throw InvalidArgument(
          str_cat("cannot copy fp32 main params into a ", dtype_name(model.dtype), " model view"));
  }
}

void copy_model_to_main(const TensorView& model, std::span<float> main) {
  check_sizes(main.size(), model.numel);
  const auto n = static_cast<std::size_t>(model.numel);
  switch (model.dtype) {
    case DType::kBFloat16:
      copy_model_to_main(std::span<const bf16_bits>(model.as<bf16_bits>(), n), main);
      return;
    case DType::kFloat16:
      fp16_to_float_n(model.as<fp16_bits>(), main.data(), model.numel);
      return;
    case DType::kFloat32:
      std::copy_n(model.as<float>(), n, main.begin());
      return;
    default:
      throw InvalidArgument(
          str_cat("cannot copy a ", dtype_name(model.dtype), " model view into fp32 main params"));
  }
}

}  // namespace shardwise::optim
