// A trained GPT read back from a training checkpoint for inference (`shardwise generate`): the
// architecture from the manifest's config, the weights from model.safetensors. No optimizer
// state and no process group are involved; the model owns its storage.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "shardwise/checkpoint/checkpoint.hpp"
#include "shardwise/comm/process_group.hpp"
#include "shardwise/model/gpt_model.hpp"

namespace shardwise {

struct CheckpointGpt {
  std::filesystem::path directory;  // the step directory read
  std::int64_t step = 0;
  nlohmann::json manifest;  // its checkpoint.json
  GptConfig config;
  std::vector<std::vector<float>> values, grads;  // per parameter, bound to the model
  std::unique_ptr<GptModel<float>> model;
};

// `path`: a checkpoint root (its latest step, or step `step`) or a step directory, as in
// resolve_checkpoint_directory. The context length is the learned position table's length, or
// model.seq_len with rotary positions. Throws IoError/FormatError/ShapeError naming the file and
// the tensor when the checkpoint does not hold the model its config describes.
CheckpointGpt load_gpt_checkpoint(const std::filesystem::path& path,
                                  std::optional<std::int64_t> step = {});

// Checkpoint views of fp32 weights held one vector per param (values[i] has params[i].numel()).
std::vector<ModelTensor> fp32_model_tensors(const ParamList& params,
                                            std::vector<std::vector<float>>& values);

// Ranks that each loaded a checkpoint to compute together (`generate --tp`): FormatError on every
// rank of `group`, naming the ranks, unless each loaded the same manifest and weights as rank 0
// (require_same_checkpoint_on_every_rank).
void require_same_gpt_checkpoint_on_every_rank(ProcessGroup& group, const CheckpointGpt& loaded);

}  // namespace shardwise
