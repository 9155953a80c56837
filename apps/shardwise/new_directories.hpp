// The directories an output path needs that do not exist yet. The path checks before a job create
// them (to probe that they can be written); a job that fails before writing anything there removes
// them again, so a failed run leaves nothing behind.
#pragma once

#include <filesystem>
#include <vector>

namespace shardwise::cli {

class NewDirectories {
 public:
  // Notes which of `dir` and its parents are missing now (none when `dir` is empty).
  explicit NewDirectories(const std::filesystem::path& dir);
  // Removes those directories, deepest first, each only while it is empty.
  void remove_while_empty() const;

 private:
  std::vector<std::filesystem::path> missing_;  // deepest first
};

}  // namespace shardwise::cli
