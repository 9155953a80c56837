#include "checkpoint_weights_path.hpp"

#include "shardwise/checkpoint/checkpoint.hpp"
#include "shardwise/checkpoint/checkpoint_shards.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/core/message_text.hpp"
#include "shardwise/reshard/tp_export.hpp"

namespace shardwise::cli {

std::filesystem::path checkpoint_weights_file(const std::filesystem::path& path,
                                              std::optional<std::int64_t> step) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(path, ec) && !fs::is_directory(path, ec)) {  // a file (the reader checks it)
    SW_REQUIRE(!step, InvalidArgument, "--step needs a checkpoint directory, not the file ",
               path.string());
    return resolve_model_weights_file(path);
  }
  const bool plain_weights_dir = fs::exists(path / kCheckpointModelFile, ec) &&
                                 !fs::exists(path / kCheckpointManifestFile, ec);
  if (plain_weights_dir && !step) return resolve_model_weights_file(path);
  return checked_checkpoint_model_file(resolve_checkpoint_directory(path, step));
}

void require_whole_model_weights(const SafetensorsFile& file) {
  const auto format = file.metadata().find("format");
  if (format == file.metadata().end()) return;
  const std::string& name = format->second;
  const char* what = name == kShardFileFormat  ? "an optimizer rank file of a checkpoint"
                     : name == kTpExportFormat ? "a tensor-parallel export (one rank's shards)"
                                               : nullptr;
  SW_REQUIRE(what == nullptr, InvalidArgument, "--checkpoint ", quoted(file.path()), " is ", what,
             " (format ", printable(name),
             "), not whole model weights: give the checkpoint directory or its ",
             kCheckpointModelFile);
}

}  // namespace shardwise::cli
