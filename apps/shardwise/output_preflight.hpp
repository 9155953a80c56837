// Checks, before a command does any work, that its output can be written: a read-only mount or a
// missing directory should cost the user a second, not a whole conversion.
#pragma once

#include <filesystem>
#include <string_view>

namespace shardwise::cli {

// Creates, writes one byte to and removes a probe file in `directory`. Throws IoError naming
// `option` and the directory (with the system's reason) when that fails or the directory does
// not exist.
void probe_output_directory(const std::filesystem::path& directory, std::string_view option);

// The directory an output file or directory `path` will be created in ("." for a bare name).
std::filesystem::path output_parent(const std::filesystem::path& path);

}  // namespace shardwise::cli
