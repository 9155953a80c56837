#include "shardwise/checkpoint/checkpoint_root_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>

#include "checkpoint_manifest.hpp"
#include "shardwise/checkpoint/checkpoint.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/core/input_file.hpp"
#include "shardwise/core/logging.hpp"
#include "shardwise/core/message_text.hpp"

namespace shardwise {

namespace fs = std::filesystem;

namespace {

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "unknown-host";
  return buf;
}

// "host pid start-time" of the current owner, as it wrote it (bounded, printable).
std::string read_owner(int fd) {
  char buf[256] = {};
  const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  std::string owner = n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
  while (!owner.empty() && (owner.back() == '\n' || owner.back() == ' ')) owner.pop_back();
  for (char& c : owner) {
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
  }
  return owner.empty() ? std::string("unknown (no owner recorded)") : owner;
}

void write_owner(int fd) {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  char since[32] = "?";
  if (::gmtime_r(&now, &utc) != nullptr) std::strftime(since, sizeof since, "%FT%TZ", &utc);
  const std::string text =
      str_cat("host ", host_name(), " pid ", ::getpid(), " since ", since, "\n");
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, text.data(), text.size(), 0) < 0) {
    log::warning("could not record the lock owner in the checkpoint lock file: ",
                 std::strerror(errno));
  }
}

// ".step-0000100.staging.<pid>.<tag>.<n>", ".step-0000100.pruned", ".latest.tmp.<...>".
bool is_interrupted_save_leftover(const std::string& name) {
  auto starts = [&](std::string_view p) { return name.compare(0, p.size(), p) == 0; };
  if (starts(".latest.tmp.")) return true;
  if (!starts(".step-")) return false;
  return name.find(".staging.") != std::string::npos ||
         (name.size() > 7 && name.compare(name.size() - 7, 7, ".pruned") == 0);
}

}  // namespace

bool is_checkpoint_root_entry(const std::string& name) {
  return name == kCheckpointLatestFile || name == kCheckpointLockFile ||
         checkpoint_detail::parse_step_directory_name(name).has_value() ||
         is_interrupted_save_leftover(name);
}

namespace {

// An empty regular file, or one starting with the owner line write_owner writes.
bool is_own_lock_file(const fs::path& file) {
  std::error_code ec;
  if (!fs::is_regular_file(fs::symlink_status(file, ec))) return false;
  const std::uintmax_t size = fs::file_size(file, ec);
  if (ec || size == 0) return !ec;
  const int fd = ::open(file.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return false;
  const std::string owner = read_owner(fd);
  ::close(fd);
  return owner.compare(0, 5, "host ") == 0 && owner.find(" pid ") != std::string::npos &&
         owner.find(" since ") != std::string::npos;
}

}  // namespace

std::vector<std::string> existing_checkpoint_root_entries(const fs::path& root) {
  std::vector<std::string> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    const std::string name = entry.path().filename().string();
    if (!is_checkpoint_root_entry(name) || is_interrupted_save_leftover(name)) continue;
    const bool pointer_or_lock = name == kCheckpointLatestFile || name == kCheckpointLockFile;
    // A `latest` or `.lock` that is no regular file is refused later, by what it is.
    if (pointer_or_lock && !fs::is_regular_file(fs::symlink_status(entry.path(), ec))) continue;
    if (name == kCheckpointLockFile && is_own_lock_file(entry.path())) continue;
    found.push_back(name);
  }
  std::sort(found.begin(), found.end());
  return found;
}

int remove_interrupted_save_leftovers(const fs::path& root) {
  int removed = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    const std::string name = entry.path().filename().string();
    if (!is_interrupted_save_leftover(name)) continue;
    std::error_code remove_error;
    fs::remove_all(entry.path(), remove_error);
    if (remove_error) {
      log::warning("could not remove ", quoted(entry.path()),
                   " (left by an interrupted checkpoint save): ", remove_error.message());
    } else {
      ++removed;
    }
  }
  return removed;
}

namespace {

// Opens (creating it when missing, `created` says so) the lock file: our own regular file only,
// since the owner line is written to it and truncated at exit, which must never reach a FIFO, a
// device or, through a symlink, some other file.
int open_lock_file(const fs::path& file, bool& created) {
  constexpr int kFlags = O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;
  int fd = ::open(file.c_str(), kFlags | O_CREAT | O_EXCL, 0666);
  created = fd >= 0;
  if (fd < 0 && errno == EEXIST) fd = ::open(file.c_str(), kFlags);
  SW_REQUIRE(fd >= 0, IoError, "cannot open checkpoint lock file ", quoted(file), ": ",
             std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw IoError(str_cat("checkpoint lock file ", quoted(file), " is ", file_kind_name(st.st_mode),
                          ", not a regular file; remove it"));
  }
  return fd;
}

// flock on `fd` without waiting; IoError naming the owner when another job holds it.
void take_flock(int fd, const fs::path& root, const fs::path& file) {
  int rc;
  do {
    rc = ::flock(fd, LOCK_EX | LOCK_NB);
  } while (rc != 0 && errno == EINTR);
  if (rc == 0) return;
  const int error = errno;
  const std::string owner = read_owner(fd);
  ::close(fd);
  SW_REQUIRE(error != EWOULDBLOCK, IoError, "checkpoint directory ", quoted(root),
             " is in use by another job (", owner, ", holding ", quoted(file),
             "); two jobs saving into one directory would interleave their checkpoints: use "
             "another --save directory or wait for that job to end");
  throw IoError(str_cat("cannot lock checkpoint directory ", quoted(root), " (", quoted(file),
                        "): ", std::strerror(error)));
}

// Whether `fd` is still the file at `file`: a job that removed the lock file as it released it
// (one that saved nothing) may have done so after we opened it, leaving us a lock nobody sees.
bool is_the_file_at(int fd, const fs::path& file) {
  struct stat held {
  }, named{};
  return ::fstat(fd, &held) == 0 && ::lstat(file.c_str(), &named) == 0 &&
         held.st_dev == named.st_dev && held.st_ino == named.st_ino;
}

// Whether `root` holds nothing but the lock file: the job saved nothing there.
bool holds_only_the_lock_file(const fs::path& root) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    if (entry.path().filename() != kCheckpointLockFile) return false;
  }
  return !ec;
}

}  // namespace

CheckpointRootLock::CheckpointRootLock(const fs::path& root) : root_(root) {
  std::error_code ec;
  created_root_ = fs::create_directories(root, ec);
  SW_REQUIRE(fs::is_directory(root), IoError, "checkpoint directory ", quoted(root),
             " cannot be created", ec ? str_cat(": ", ec.message()) : std::string());
  const fs::path file = root / kCheckpointLockFile;
  for (int attempt = 0; fd_ < 0; ++attempt) {
    const int fd = open_lock_file(file, created_file_);
    take_flock(fd, root, file);
    if (is_the_file_at(fd, file)) {
      fd_ = fd;
    } else {
      ::close(fd);  // removed under us: lock the file that is there now
      SW_REQUIRE(attempt < 100, IoError, "cannot lock checkpoint directory ", quoted(root), " (",
                 quoted(file), " keeps being replaced)");
    }
  }
  write_owner(fd_);
  removed_ = remove_interrupted_save_leftovers(root);
}

CheckpointRootLock::~CheckpointRootLock() {
  if (fd_ < 0) return;
  // A job that saved nothing leaves nothing: the lock file (and the root) it created go, removed
  // while still locked (a job that opened the file meanwhile sees it gone and retries).
  if (created_file_ && holds_only_the_lock_file(root_)) {
    std::error_code ec;
    fs::remove(root_ / kCheckpointLockFile, ec);
    ::close(fd_);
    if (created_root_) fs::remove(root_, ec);  // only when empty
    return;
  }
  // Otherwise the file stays, emptied; the lock goes with the fd.
  if (::ftruncate(fd_, 0) != 0) {
    // Best effort: a stale owner line is harmless, flock is what counts.
  }
  ::close(fd_);
}

}  // namespace shardwise
