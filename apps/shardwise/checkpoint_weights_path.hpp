// The model weights file of what a user names with --checkpoint: a .safetensors file, a
// directory holding model.safetensors (a plain weights directory), a step directory of
// `train --save` or a --save root (its latest step, or `step`).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>

#include "shardwise/checkpoint/safetensors.hpp"

namespace shardwise::cli {

// A step directory's manifest is validated as `train --load` and `generate` do (a damaged or
// newer-format checkpoint is refused). `step` needs a directory.
std::filesystem::path checkpoint_weights_file(const std::filesystem::path& path,
                                              std::optional<std::int64_t> step);

// Refuses a file shardwise wrote that holds something other than whole model weights: an
// optimizer rank file (its state tensors were exported as weights) or a tensor-parallel export
// (its shards would be split again).
void require_whole_model_weights(const SafetensorsFile& file);

}  // namespace shardwise::cli
