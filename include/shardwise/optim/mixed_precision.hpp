// Mixed precision: the optimizer updates fp32 main params; the model computes with 16-bit
// copies. After a step the main params are rounded (RNE) into the model's views; at start (or
// after loading a checkpoint of model weights) the model params are widened into main params.
#pragma once

#include <span>

#include "shardwise/core/float_convert.hpp"
#include "shardwise/core/tensor_view.hpp"

namespace shardwise::optim {

// The param dtypes the optimizers step: fp32 in place, bf16 and fp16 through fp32 main copies.
inline bool is_steppable_param_dtype(DType dtype) {
  return dtype == DType::kFloat32 || dtype == DType::kBFloat16 || dtype == DType::kFloat16;
}

// model[i] = bf16(main[i]), round-to-nearest-even. Sizes must match.
void copy_main_to_model(std::span<const float> main, std::span<bf16_bits> model);
// main[i] = model[i] (exact).
void copy_model_to_main(std::span<const bf16_bits> model, std::span<float> main);

// Same for a model view of any floating dtype: bf16, fp16 (RNE, overflow to inf) or fp32.
void copy_main_to_model(std::span<const float> main, const TensorView& model);
void copy_model_to_main(const TensorView& model, std::span<float> main);

}  // namespace shardwise::optim
