#include "shardwise/optim/main_params.hpp"

#include <numeric>
#include <utility>

#include "shardwise/core/error.hpp"
#include "shardwise/optim/mixed_precision.hpp"

namespace shardwise::optim {

bool OwnedSlice::whole() const {
  const std::int64_t numel =
      std::accumulate(shape.begin(), shape.end(), std::int64_t{1}, std::multiplies<>());
  return offset == 0 && count == numel;
}

MainParams::MainParams(std::vector<OwnedSlice> slices, ShardMathPtr math)
    : slices_(std::move(slices)), math_(std::move(math)) {
  copies_.resize(slices_.size());
  for (std::size_t i = 0; i < slices_.size(); ++i) {
    const OwnedSlice& s = slices_[i];
    SW_REQUIRE(s.grad.dtype == DType::kFloat32, InvalidArgument, "param '", s.name,
               "': the distributed optimizers need fp32 gradients (grad_reduce_in_fp32), got ",
               dtype_name(s.grad.dtype));
    SW_REQUIRE(s.model_param.numel == s.count && s.grad.numel == s.count, InvalidArgument,
               "param '", s.name, "': owned slice of ", s.count, " elements but views of ",
               s.model_param.numel, " / ", s.grad.numel);
    math_->require_same_memory(s.model_param.device, str_cat("param '", s.name, "'"));
    SW_REQUIRE(is_steppable_param_dtype(s.model_param.dtype), InvalidArgument, "param '", s.name,
               "' is ", dtype_name(s.model_param.dtype),
               ": the optimizers step fp32, bf16 and fp16 params (fp32 main copies of 16-bit "
               "ones)");
    if (s.model_param.dtype != DType::kFloat32) {
      copies_[i] = math_->zeros(s.count);
      math_->widen(s.model_param, copies_[i].data());
    }
  }
}

OptimParam MainParams::optim_param(std::size_t index) {
  const OwnedSlice& s = slices_[index];
  OptimParam p;
  p.name = s.name;
  p.shape = s.whole() ? s.shape : std::vector<std::int64_t>{s.count};
  p.main_param = has_copy(index) ? copies_[index].data() : s.model_param.as<float>();
  p.grad = s.grad.as<float>();
  if (s.whole()) p.qkv_split = s.qkv_split;
  return p;
}

void MainParams::copy_main_to_model() {
  for (std::size_t i = 0; i < slices_.size(); ++i) {
    if (has_copy(i)) math_->narrow(copies_[i].data(), slices_[i].model_param);
  }
}

void MainParams::copy_model_to_main() {
  for (std::size_t i = 0; i < slices_.size(); ++i) {
    if (has_copy(i)) math_->widen(slices_[i].model_param, copies_[i].data());
  }
}

}  // namespace shardwise::optim
