// Sharded, reshardable, crash-safe training checkpoints.
//
// Layout of a checkpoint root DIR:
//   DIR/step-0000100/                          one directory per save (7-digit step)
//       model.safetensors                      full (unsharded) weights: one tensor per param name
//       optimizer-rank-00000-of-00004.safetensors   per data-parallel rank: the fp32 main params
//       ...                                    and optimizer state of what that rank owns
//                                              (see checkpoint_shards.hpp for the tensor names)
//       checkpoint.json                        manifest: format version, step, data position,
//                                              config, dp size, optimizer kind, layouts, and the
//                                              index of which file holds which element range of
//                                              which param and state field
//   DIR/latest                                 pointer file naming the newest published step dir
//
// Saving is collective over the data-parallel group: rank 0 creates a hidden staging directory
// next to the step directory, every rank writes its file into it (rank 0 also the model file),
// the ranks agree on success (all-reduce of failure flags), rank 0 writes the manifest, fsyncs
// and renames the directory into place and then replaces `latest`. Any failure removes the
// staging directory and makes every rank throw; a crash at any point leaves `latest` naming the
// previous complete checkpoint.
//
// Loading reads the model weights from model.safetensors and, for each element range this rank's
// optimizer owns under the current layout, the overlapping pieces of the saved ranges (located
// through the manifest's index), so a checkpoint saved at dp=A loads at dp=B with any bucket
// size. The optimizer kind must match the one saved. With layer-wise shard groups (S < dp) only
// the first replica writes its layer-wise shards, so each element is saved once; the manifest's
// "layer_wise_replicas" records dp/S, and a checkpoint saved at one (dp, S) loads at any other.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "shardwise/checkpoint/checkpoint_shards.hpp"
#include "shardwise/comm/process_group.hpp"
#include "shardwise/core/tensor_view.hpp"
#include "shardwise/optim/optimizer.hpp"

namespace shardwise {

inline constexpr std::string_view kCheckpointFormat = "shardwise.checkpoint";
inline constexpr int kCheckpointFormatVersion = 1;
inline constexpr std::string_view kCheckpointManifestFile = "checkpoint.json";
inline constexpr std::string_view kCheckpointModelFile = "model.safetensors";
inline constexpr std::string_view kCheckpointLatestFile = "latest";

// One model parameter: its name, full shape and its (complete, unsharded) values.
struct ModelTensor {
  std::string name;
  std::vector<std::int64_t> shape;
  TensorView values;
};

struct CheckpointSaveRequest {
  std::filesystem::path root;         // DIR (created when missing)
  std::int64_t step = 0;              // optimizer steps completed (the next step's index)
  std::int64_t consumed_samples = 0;  // training samples consumed (the data-loader position)
  int keep_last = 0;                  // > 0: keep only the newest K step directories
  std::string optimizer_kind;         // the training config's name for the optimizer mode
  // Extra top-level manifest entries (e.g. "config", "layouts", "rng"); must be an object or
  // null. Only rank 0's is used.
  nlohmann::ordered_json extra;
};

// Saves a checkpoint of step `request.step`; collective over `group` (the data-parallel group:
// file names carry its rank and size). `model` must hold the complete current weights on rank 0
// (finish any pending param all-gather first). Returns the published step directory. Throws
// IoError on every rank when any rank failed; nothing is published then.
std::filesystem::path save_checkpoint(const CheckpointSaveRequest& request,
                                      const std::vector<ModelTensor>& model,
                                      const optim::Optimizer& optimizer, ProcessGroup& group);

// Throws IoError when ROOT/latest is a symbolic link: a save replaces latest with the step's
// name, which through the link would write over the file it points to (an input, even).
void require_replaceable_latest_pointer(const std::filesystem::path& root);

struct LoadedCheckpoint {
  std::filesystem::path directory;
  std::int64_t step = 0;
  std::int64_t consumed_samples = 0;
  nlohmann::json manifest;
};

// Loads the step directory `directory` (see resolve_checkpoint_directory) into the model values
// and the optimizer; collective over `group` (every rank loads its own part; failure on any rank
// makes all throw). `optimizer_kind`, when not empty, must equal the saved kind. Errors name the
// file and tensor (FormatError, ShapeError, IoError); nothing on disk is modified.
LoadedCheckpoint load_checkpoint(const std::filesystem::path& directory,
                                 const std::vector<ModelTensor>& model, optim::Optimizer& optimizer,
                                 ProcessGroup& group, std::string_view optimizer_kind);

// "step-0000100".
std::string step_directory_name(std::int64_t step);
// "optimizer-rank-00001-of-00004.safetensors".
std::string optimizer_rank_file_name(int rank, int size);

// Which step directory `path` means: `path` itself when it holds a checkpoint.json (then `step`,
// if given, must match); else `path`/step-S for a given step; else the directory `path`/latest
// names. Throws IoError/FormatError naming what is missing (for a missing step, the steps that
// exist). The one resolver behind `train --load` and `reshard --checkpoint`.
std::filesystem::path resolve_checkpoint_directory(const std::filesystem::path& path,
                                                   std::optional<std::int64_t> step = {});

// Steps of the complete checkpoints (step directories with a checkpoint.json) under `root`,
// ascending; empty when there are none or `root` is not a directory.
std::vector<std::int64_t> list_checkpoint_steps(const std::filesystem::path& root);

// Reads and validates a step directory's checkpoint.json.
nlohmann::json read_checkpoint_manifest(const std::filesystem::path& directory);

// The "config"."model" object `shardwise train` writes into a manifest, or nullptr when the
// manifest has none (a checkpoint saved outside the trainer).
const nlohmann::json* saved_model_config(const nlohmann::json& manifest);

// The optimizer shards step directory `directory`'s manifest indexes (which rank file holds which
// elements and fields of which param), checked as a load checks them: FormatError naming the
// manifest when its "index" is malformed or does not cover each param's elements once.
std::vector<SavedShard> read_checkpoint_index(const std::filesystem::path& directory);

// The weights file of step directory `directory`, checked against its manifest: the file the
// manifest names, holding exactly the tensors of its "model" list with their shapes and dtypes
// (a reader of the weights alone would export a file edited after the save). FormatError naming
// the tensor otherwise.
std::filesystem::path checked_checkpoint_model_file(const std::filesystem::path& directory);

// For readers of a checkpoint's weights on several ranks (load_checkpoint does this itself):
// FormatError on every rank of `group`, naming the ranks, unless each read the same checkpoint as
// rank 0: `manifest` (of step directory `directory`) and `model`, the tensors it read (names,
// shapes and a sample of their values). Ranks whose storage holds another run's checkpoint under
// the same path would otherwise compute with a mix of two models.
void require_same_checkpoint_on_every_rank(ProcessGroup& group,
                                           const std::filesystem::path& directory,
                                           const nlohmann::json& manifest,
                                           const std::vector<ModelTensor>& model);

// Test hook: called at named stages of save_checkpoint, in this order: "staged" (every rank;
// staging directory known, before writing), "model_file_written" (rank 0), "rank_file_written"
// (every rank), then on rank 0 only "before_commit" (manifest written), "committed" (step
// directory in place, `latest` not yet moved) and "published" (`latest` moved, before pruning).
// An exception thrown by it is treated as that rank's failure. Pass {} to remove.
using CheckpointFaultHook = std::function<void(std::string_view stage, int rank)>;
void set_checkpoint_fault_hook(CheckpointFaultHook hook);

}  // namespace shardwise
