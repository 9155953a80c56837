// A checkpoint holds each param twice: in model.safetensors and, as fp32 main params, in the
// optimizer rank files. Training resumes from the main params and `generate` / `reshard` read the
// model file, so two files from different checkpoints (a rank file copied from another run) gave
// runs that silently disagreed. For fp32 params the two must be the same bits; a load compares
// them at a sample of elements (every 1024th and each shard's last), cheap enough for every load.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "shardwise/checkpoint/checkpoint.hpp"
#include "shardwise/optim/optimizer.hpp"

namespace shardwise::checkpoint_detail {

struct MainParamSample {
  std::string param;
  std::int64_t element = 0;     // within the flattened param
  float model_value = 0;        // as the model file had it
  const float* main = nullptr;  // where the optimizer holds that element's main value
};

// The model file's values at sampled elements of every fp32 param whose main values `optimizer`
// holds; taken after the model file was read and before the optimizer shards are (for fp32
// params the main values are the param buffer itself, which the shards then overwrite).
std::vector<MainParamSample> sample_model_values(const optim::Optimizer& optimizer,
                                                 const std::vector<ModelTensor>& model);

// FormatError naming the first sampled element whose main value (as loaded) differs from the
// model file's.
void require_main_params_match(const std::vector<MainParamSample>& samples,
                               const std::filesystem::path& directory);

}  // namespace shardwise::checkpoint_detail
