// The trainer's model, CPU or device: the steps call these and never ask which one runs.
#include "training_run.hpp"

namespace shardwise::train_detail {

double TrainingModel::forward(const std::int32_t* tokens, const std::int32_t* targets, int batch,
                              int seq) {
  if (device_model) return device_model->forward(tokens, targets, batch, seq);
  return model->forward(tokens, targets, batch, seq);
}

void TrainingModel::backward(double loss_scale, const std::function<void(ParamId)>& grad_ready) {
  if (device_model) {
    device_model->backward(loss_scale, grad_ready);
  } else {
    model->backward(loss_scale, grad_ready);
  }
}

std::vector<bool> TrainingModel::exact_match() const {
  return device_model ? device_model->exact_match() : model->exact_match();
}

void TrainingModel::weights_to_host() {
  if (!host_mirror) return;
  ddp().finish_all_param_sync();
  copy_params_to_host(*host_mirror);
}

void TrainingModel::weights_to_device() {
  if (host_mirror) copy_params_from_host(*host_mirror);
}

}  // namespace shardwise::train_detail
