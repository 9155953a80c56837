#include "shardwise/train/trainable_model.hpp"

namespace shardwise {
namespace {

class HostGpt final : public TrainableModel {
 public:
  explicit HostGpt(GptModel<float>& model) : model_(model) {}
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
  GptModel<float>& model_;
};

}  // namespace

std::unique_ptr<TrainableModel> trainable(GptModel<float>& model) {
  return std::make_unique<HostGpt>(model);
}

}  // namespace shardwise
