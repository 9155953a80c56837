// Internal to the trainer: checkpoints of a tensor-parallel run in the tp = 1 format. A TP run
// saves full tensors (each param and optimizer-state field gathered over its DP and TP groups),
// so a checkpoint loads at any tp x dp; a TP run loads one by reading the full tensors and taking
// its own TP slice. See docs/tensor_parallel_training.md.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "training_run.hpp"

namespace shardwise::train_detail {

// The tp = 1 view of the model's weights: full ParamInfos and values (gathered over the TP group:
// a collective every TP rank calls). At tp = 1 a copy of the weights.
struct FullWeights {
  ParamList params;
  std::vector<std::vector<float>> values;
  std::vector<ModelTensor> tensors();
};
FullWeights gather_full_weights(const TrainingModel& m, const RunContext& run);

// Saves checkpoint `request.step` of a TP run (collective over the world); returns its directory.
std::string save_tensor_parallel_checkpoint(TrainingModel& m, const RunContext& run,
                                            CheckpointSaveRequest request);

// Loads the step directory into a TP run's model and optimizer (collective over the world).
LoadedCheckpoint load_tensor_parallel_checkpoint(TrainingModel& m, const RunContext& run,
                                                 const std::filesystem::path& directory);

}  // namespace shardwise::train_detail
