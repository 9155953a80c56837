// The slices of model parameters one rank's distributed optimizer owns, and their fp32 main
// copies. When the param buffer is fp32 the main param IS the buffer slice (no copy: the update
// lands in the buffer and the all-gather ships it); for bf16/fp16 buffers an fp32 master copy is
// kept in the optimizer's memory (host or device, its ShardMath) and written back
// (round-to-nearest-even) after each step.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "shardwise/core/tensor_view.hpp"
#include "shardwise/layout/param_info.hpp"
#include "shardwise/optim/optimizer.hpp"
#include "shardwise/optim/shard_math.hpp"

namespace shardwise::optim {

struct OwnedSlice {
  ParamId param = 0;
  std::string name;                 // the model param's name
  std::vector<std::int64_t> shape;  // the model param's full shape
  std::int64_t offset = 0;          // first owned element within the param
  std::int64_t count = 0;           // owned elements
  TensorView model_param;           // the owned elements in the param buffer
  TensorView grad;                  // the owned elements in the grad buffer (fp32)
  std::vector<std::int64_t> qkv_split;

  bool whole() const;
};

class MainParams {
 public:
  // Throws InvalidArgument naming the param when a grad view is not fp32 (the distributed
  // optimizers need grad_reduce_in_fp32), sizes disagree, or a view is not in `math`'s memory.
  MainParams(std::vector<OwnedSlice> slices, ShardMathPtr math);
  MainParams(MainParams&&) = default;

  const std::vector<OwnedSlice>& slices() const { return slices_; }
  // OptimParams over the main params and grads of the selected slices. Whole params keep their
  // shape (Muon needs it); partial slices are 1-D. Names are the model param names.
  template <typename Select>
  std::vector<OptimParam> optim_params(Select select) {
    std::vector<OptimParam> out;
    for (std::size_t i = 0; i < slices_.size(); ++i) {
      if (select(slices_[i])) out.push_back(optim_param(i));
    }
    return out;
  }
  // Writes the fp32 main values into the (lower precision) model param buffer. No-op for fp32
  // buffers, whose main params are the buffer itself.
  void copy_main_to_model();
  // Refreshes the main copies from the model buffer (after the model params were loaded).
  void copy_model_to_main();

 private:
  OptimParam optim_param(std::size_t index);
  bool has_copy(std::size_t index) const {
    return slices_[index].model_param.dtype != DType::kFloat32;
  }

  std::vector<OwnedSlice> slices_;
  ShardMathPtr math_;
  std::vector<FloatArray> copies_;  // per slice, in math_'s memory; empty when the buffer is fp32
};

}  // namespace shardwise::optim
