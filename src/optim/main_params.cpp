#include "shardwise/optim/main_params.hpp"

#include <numeric>
#include <span>

#include "shardwise/core/error.hpp"
#include "shardwise/optim/mixed_precision.hpp"

namespace shardwise::optim {

bool OwnedSlice::whole() const {
  const std::int64_t numel =
      std::accumulate(shape.begin(), shape.end(), std::int64_t{1}, std::multiplies<>());
  return offset == 0 && count == numel;
}

MainParams::MainParams(std::vector<OwnedSlice> slices) : slices_(std::move(slices)) {
  copies_.resize(slices_.size());
  for (std::size_t i = 0; i < slices_.size(); ++i) {
    const OwnedSlice& s = slices_[i];
    SW_REQUIRE(s.grad.dtype == DType::kFloat32, InvalidArgument, "param '", s.name,
               "': the distributed optimizers need fp32 gradients (grad_reduce_in_fp32), got ",
               dtype_name(s.grad.dtype));
    SW_REQUIRE(s.model_param.numel == s.count && s.grad.numel == s.count, InvalidArgument,
               "param '", s.name, "': owned slice of ", s.count, " elements but views of ",
               s.model_param.numel, " / ", s.grad.numel);
    // The fp32 master copy of a 16-bit buffer is host memory; device buffers keep fp32 params
    // (their main params are the buffer itself).
    SW_REQUIRE(!s.model_param.on_device() || s.model_param.dtype == DType::kFloat32,
               InvalidArgument, "param '", s.name, "': its ", dtype_name(s.model_param.dtype),
               " param buffer is on CUDA device ", s.model_param.device,
               "; device buffers need fp32 params (no device master copies yet)");
    if (s.model_param.dtype != DType::kFloat32) {
      copies_[i].resize(static_cast<std::size_t>(s.count));
      optim::copy_model_to_main(s.model_param, std::span<float>(copies_[i]));
    }
  }
}

OptimParam MainParams::optim_param(std::size_t index) {
  const OwnedSlice& s = slices_[index];
  OptimParam p;
  p.name = s.name;
  p.shape = s.whole() ? s.shape : std::vector<std::int64_t>{s.count};
  p.main_param = copies_[index].empty() ? s.model_param.as<float>() : copies_[index].data();
  p.grad = s.grad.as<float>();
  if (s.whole()) p.qkv_split = s.qkv_split;
  return p;
}

void MainParams::copy_main_to_model() {
  for (std::size_t i = 0; i < slices_.size(); ++i) {
    if (!copies_[i].empty())
      optim::copy_main_to_model(std::span<const float>(copies_[i]), slices_[i].model_param);
  }
}

void MainParams::copy_model_to_main() {
  for (std::size_t i = 0; i < slices_.size(); ++i) {
    if (!copies_[i].empty()) {
      optim::copy_model_to_main(slices_[i].model_param, std::span<float>(copies_[i]));
    }
  }
}

}  // namespace shardwise::optim
