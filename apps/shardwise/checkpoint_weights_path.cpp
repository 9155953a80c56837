#include "checkpoint_weights_path.hpp"

#include "shardwise/checkpoint/checkpoint.hpp"
#include "shardwise/core/error.hpp"
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

}  // namespace shardwise::cli
