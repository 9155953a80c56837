#include "new_directories.hpp"

#include <system_error>

namespace shardwise::cli {

namespace fs = std::filesystem;

NewDirectories::NewDirectories(const fs::path& dir) {
  if (dir.empty()) return;
  fs::path p = dir.lexically_normal();
  if (!p.has_filename()) p = p.parent_path();  // "DIR/"
  for (; !p.empty() && p.has_filename(); p = p.parent_path()) {
    std::error_code ec;  // set for a missing path too: what counts is the status
    if (fs::symlink_status(p, ec).type() != fs::file_type::not_found) break;
    missing_.push_back(p);
  }
}

void NewDirectories::remove_while_empty() const {
  for (const fs::path& p : missing_) {
    std::error_code ec;
    if (!fs::is_directory(fs::symlink_status(p, ec)) || !fs::is_empty(p, ec) || ec) return;
    fs::remove(p, ec);
  }
}

}  // namespace shardwise::cli
