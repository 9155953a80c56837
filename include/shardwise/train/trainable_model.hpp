// The model the trainer drives, wherever it computes: forward, backward with a hook per finished
// gradient, and exact-match. The reference GPT on the host (GptModel<float>) and on a CUDA device
// (the train_cuda layer) both implement it; the trainer's steps see nothing else of the model.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "shardwise/layout/param_info.hpp"
#include "shardwise/model/gpt_model.hpp"

namespace shardwise {

class TrainableModel {
 public:
  virtual ~TrainableModel() = default;
  // gpt_param_list's order: ids index it.
  virtual const ParamList& params() const = 0;
  // Mean cross-entropy over counted targets (host arrays, batch x seq); keeps what backward needs.
  virtual double forward(const std::int32_t* tokens, const std::int32_t* targets, int batch,
                         int seq) = 0;
  // Accumulates d(loss_scale * loss)/d(param) into the bound gradients, calling grad_ready(id)
  // as each is final (on a device: queued, and ordered before anything queued after it).
  virtual void backward(double loss_scale, const std::function<void(ParamId)>& grad_ready) = 0;
  // After forward: per sequence, whether every counted target is the argmax prediction.
  virtual std::vector<bool> exact_match() const = 0;
};

// A model with GptModel's methods (the host one, the device one) behind the interface. Model is
// the model itself (owned, built from the constructor's arguments) or a reference to one owned
// elsewhere.
template <typename Model>
class TrainableGpt final : public TrainableModel {
 public:
  template <typename... Args>
  explicit TrainableGpt(Args&&... args) : model_(std::forward<Args>(args)...) {}
  std::remove_reference_t<Model>& model() { return model_; }
  const ParamList& params() const override { return model_.params(); }
  double forward(const std::int32_t* tokens, const std::int32_t* targets, int batch,
                 int seq) override {
    return model_.forward(tokens, targets, batch, seq);
  }
  void backward(double loss_scale, const std::function<void(ParamId)>& grad_ready) override {
    model_.backward(loss_scale, grad_ready);
  }
  std::vector<bool> exact_match() const override { return model_.exact_match(); }

 private:
  Model model_;
};

// The host model behind the interface (not owned).
inline std::unique_ptr<TrainableModel> trainable(GptModel<float>& model) {
  return std::make_unique<TrainableGpt<GptModel<float>&>>(model);
}

}  // namespace shardwise
