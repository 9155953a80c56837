#include "shardwise/optim/shard_math.hpp"

#include <utility>

#include "shardwise/core/error.hpp"
#include "shardwise/core/tensor_view.hpp"
#include "shardwise/optim/adamw.hpp"
#include "shardwise/optim/grad_stats.hpp"
#include "shardwise/optim/mixed_precision.hpp"
#include "shardwise/optim/muon.hpp"
#include "shardwise/optim/optimizer_state_view.hpp"

namespace shardwise::optim {

void ShardMath::require_same_memory(int view_device, const std::string& what) const {
  const auto where = [](int device) {
    return device == TensorView::kHostMemory ? std::string("host memory")
                                             : str_cat("CUDA device ", device);
  };
  SW_REQUIRE(view_device == device(), InvalidArgument, what, " lives in ", where(view_device),
             " but the optimizer's math runs on ", where(device()));
}

namespace {

class HostShardMath final : public ShardMath {
 public:
  int device() const override { return TensorView::kHostMemory; }

  double sum_of_squares(const float* values, std::int64_t n) const override {
    return optim::sum_of_squares({values, static_cast<std::size_t>(n)});
  }
  std::int64_t count_zeros(const float* values, std::int64_t n) const override {
    return optim::count_zeros({values, static_cast<std::size_t>(n)});
  }
  void scale(float* values, std::int64_t n, float coeff) const override {
    scale_in_place({values, static_cast<std::size_t>(n)}, coeff);
  }

  FloatArray zeros(std::int64_t n) const override {
    return adopt(std::vector<float>(static_cast<std::size_t>(n), 0.0f));
  }
  FloatArray adopt(std::vector<float>&& values) const override {
    auto holder = std::make_shared<std::vector<float>>(std::move(values));
    const auto n = static_cast<std::int64_t>(holder->size());
    return {std::shared_ptr<float>(holder, holder->data()), n};
  }
  std::vector<float> to_host(const float* values, std::int64_t n) const override {
    return {values, values + n};
  }
  std::span<const float> view_values(const FloatArray& array,
                                     OptimizerStateView& /*view*/) const override {
    return {array.data(), static_cast<std::size_t>(array.size())};
  }

  void widen(const TensorView& model, float* main) const override {
    copy_model_to_main(model, {main, static_cast<std::size_t>(model.numel)});
  }
  void narrow(const float* main, const TensorView& model) const override {
    copy_main_to_model({main, static_cast<std::size_t>(model.numel)}, model);
  }

  void adamw_update(const AdamWStepScalars& scalars, float* param, const float* grad,
                    float* exp_avg, float* exp_avg_sq, std::int64_t n) const override {
    const auto size = static_cast<std::size_t>(n);
    optim::adamw_update(scalars, {param, size}, {grad, size}, {exp_avg, size}, {exp_avg_sq, size});
  }
  std::unique_ptr<MuonMatrixStep> make_muon_step(const MuonOptions& options) const override {
    return make_host_muon_step(options);
  }
};

}  // namespace

const ShardMathPtr& host_shard_math() {
  static const ShardMathPtr math = std::make_shared<HostShardMath>();
  return math;
}

}  // namespace shardwise::optim
