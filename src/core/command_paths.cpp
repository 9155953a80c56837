#include "shardwise/core/command_paths.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "shardwise/core/error.hpp"
#include "shardwise/core/input_file.hpp"
#include "shardwise/core/message_text.hpp"
#include "shardwise/core/output_preflight.hpp"

namespace shardwise {

namespace fs = std::filesystem;

namespace {

bool is_output(PathUse use) { return use != PathUse::kReadFile && use != PathUse::kReadTree; }

// What a path names: device and inode when it exists, else its absolute path with the symlinks
// of its existing part resolved (how the writer will reach it).
struct PathIdentity {
  const CommandPath* given = nullptr;
  fs::path resolved;
  bool exists = false;
  dev_t device = 0;
  ino_t inode = 0;
};

PathIdentity identify(const CommandPath& given) {
  PathIdentity id;
  id.given = &given;
  std::error_code ec;
  const fs::path absolute = fs::absolute(given.path, ec);
  id.resolved = ec ? given.path.lexically_normal() : fs::weakly_canonical(absolute, ec);
  if (ec) id.resolved = absolute.lexically_normal();  // a symlink loop: refused by the checks
  if (!id.resolved.has_filename()) id.resolved = id.resolved.parent_path();  // "dir/" is dir
  struct stat st {};
  if (::stat(given.path.c_str(), &st) == 0) {
    id.exists = true;
    id.device = st.st_dev;
    id.inode = st.st_ino;
  }
  return id;
}

bool same_file(const PathIdentity& a, const PathIdentity& b) {
  if (a.exists && b.exists) return a.device == b.device && a.inode == b.inode;
  return a.resolved == b.resolved;
}

// Whether `inner` lies strictly inside the directory `outer` (compared path component-wise).
bool lies_inside(const PathIdentity& inner, const PathIdentity& outer) {
  const fs::path& in = inner.resolved;
  const fs::path& out = outer.resolved;
  const auto in_len = std::distance(in.begin(), in.end());
  const auto out_len = std::distance(out.begin(), out.end());
  return in_len > out_len && std::equal(out.begin(), out.end(), in.begin());
}

// "--plot 'x'", or just "'x'" for a positional path (its option is empty).
std::string described_path(const PathIdentity& id) {
  const std::string path = str_cat("'", printable(id.given->path.string(), 4096), "'");
  return id.given->option.empty() ? path : str_cat(id.given->option, " ", path);
}

// Refuses the pair when writing one would destroy the other.
void check_pair(const PathIdentity& a, const PathIdentity& b) {
  const bool a_out = is_output(a.given->use);
  const bool b_out = is_output(b.given->use);
  if (!a_out && !b_out) return;
  if (same_file(a, b)) {
    if (a_out && b_out) {
      throw IoError(str_cat(described_path(a), " and ", described_path(b),
                            " are the same file: one output would overwrite the other"));
    }
    const PathIdentity& out = a_out ? a : b;
    const PathIdentity& in = a_out ? b : a;
    throw IoError(str_cat(described_path(out), " is the same file as the input ",
                          described_path(in), ": writing it would destroy the input"));
  }
  for (const auto& [inner, outer] : {std::pair{&a, &b}, std::pair{&b, &a}}) {
    const PathUse outer_use = outer->given->use;
    const bool destroys = (outer_use == PathUse::kReadTree && is_output(inner->given->use)) ||
                          outer_use == PathUse::kReplaceDirectory;
    if (destroys && lies_inside(*inner, *outer)) {
      throw IoError(str_cat(described_path(*inner), " lies inside ", described_path(*outer),
                            outer_use == PathUse::kReadTree
                                ? ", which is read: writing there could destroy an input"
                                : ", which is replaced as a whole"));
    }
  }
}

void preflight_replaced_directory(const CommandPath& given) {
  struct stat st {};
  if (::stat(given.path.c_str(), &st) == 0) {
    SW_REQUIRE(S_ISDIR(st.st_mode), IoError, given.option, " '",
               printable(given.path.string(), 4096), "' is ", file_kind_name(st.st_mode),
               "; it must be a directory or not exist");
  } else if (errno != ENOENT) {
    throw IoError(str_cat("cannot access ", given.option, " '",
                          printable(given.path.string(), 4096), "': ", std::strerror(errno)));
  }
  const fs::path parent = given.path.has_parent_path() ? given.path.parent_path() : fs::path(".");
  preflight_output_directory(parent, given.option);
}

}  // namespace

void check_command_paths(const std::vector<CommandPath>& paths) {
  std::vector<PathIdentity> ids;
  for (const CommandPath& given : paths) {
    if (!given.path.empty()) ids.push_back(identify(given));
  }
  for (std::size_t i = 0; i < ids.size(); ++i) {
    for (std::size_t j = i + 1; j < ids.size(); ++j) check_pair(ids[i], ids[j]);
  }
  for (const PathIdentity& id : ids) {
    const CommandPath& given = *id.given;
    if (given.use == PathUse::kWriteFile) preflight_output_file(given.path, given.option);
    if (given.use == PathUse::kWriteIntoDirectory) {
      preflight_output_directory(given.path, given.option);
    }
    if (given.use == PathUse::kReplaceDirectory) preflight_replaced_directory(given);
  }
}

std::optional<fs::path> path_within(const fs::path& inner, const fs::path& outer) {
  const CommandPath in{"", inner, PathUse::kReadFile};
  const CommandPath out{"", outer, PathUse::kReadTree};
  const PathIdentity in_id = identify(in);
  const PathIdentity out_id = identify(out);
  if (same_file(in_id, out_id)) return fs::path(".");
  if (!lies_inside(in_id, out_id)) return std::nullopt;
  return in_id.resolved.lexically_relative(out_id.resolved);
}

}  // namespace shardwise
