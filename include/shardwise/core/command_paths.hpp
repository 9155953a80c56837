// The paths one command reads and writes, checked together before any work: an output must not be
// the same file as an input (`train --config c.yaml --log-jsonl c.yaml` overwrote the config) or
// as another output (`--log-jsonl X --plot X` lost the metrics), and each output must be usable
// (output_preflight.hpp: a regular file or nothing, in a writable directory). Files are compared,
// not strings: existing ones by device and inode (hard links and symlinks included), the others
// by their absolute path with every existing symlink resolved.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace shardwise {

enum class PathUse {
  kReadFile,            // a file the command reads
  kReadTree,            // a directory the command reads files from (no output may go inside)
  kWriteFile,           // a file the command creates or replaces
  kWriteIntoDirectory,  // a directory the command adds files to (created when missing)
  kReplaceDirectory,    // a directory the command creates or replaces as a whole
};

struct CommandPath {
  std::string option;  // how the user gave it: "--log-jsonl", "data.path"; "" for a positional
  std::filesystem::path path;  // empty: not given, skipped
  PathUse use;
};

// Throws IoError naming both options and paths when an output is the same file as an input or as
// another output, an output lies inside a kReadTree input, or an input lies inside a
// kReplaceDirectory output; then preflights every output (preflight_output_file / _directory;
// a kReplaceDirectory that exists must be a directory). Creates missing kWriteIntoDirectory
// directories, writes nothing else.
void check_command_paths(const std::vector<CommandPath>& paths);

// Where `inner` lies within the directory `outer`, both resolved as above: the relative path
// ("." when they are the same directory), or nullopt when `inner` is elsewhere.
std::optional<std::filesystem::path> path_within(const std::filesystem::path& inner,
                                                 const std::filesystem::path& outer);

}  // namespace shardwise
