// Every param's bytes at the end of a training run, in forward order: what the trainer tests
// compare bit for bit between two runs (TrainerOptions::on_finish hands over the model).
#pragma once

#include <vector>

#include "shardwise/train/trainer.hpp"

namespace shardwise::train_test {

inline std::vector<unsigned char> trained_param_bytes(const TrainedModel& model) {
  std::vector<unsigned char> out;
  for (const TensorView& v : model.values) {
    const auto* p = static_cast<const unsigned char*>(v.data);
    out.insert(out.end(), p, p + v.nbytes());
  }
  return out;
}

}  // namespace shardwise::train_test
