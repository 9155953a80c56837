#include "shardwise/core/atomic_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>
#include <sstream>

#include "shardwise/core/error.hpp"
#include "shardwise/core/input_file.hpp"
#include "shardwise/core/message_text.hpp"

namespace shardwise {

namespace fs = std::filesystem;

namespace {

// Writes smaller than this are gathered; larger ones are passed to the file directly.
constexpr std::size_t kSinkBufferBytes = std::size_t{1} << 20;

[[noreturn]] void throw_errno(std::string_view what, const fs::path& path, int err) {
  throw IoError(str_cat(what, " ", quoted(path), ": ", std::strerror(err)));
}

fs::path parent_or_dot(const fs::path& target) {
  fs::path parent = target.parent_path();
  return parent.empty() ? fs::path(".") : parent;
}

// A name no other writer (thread or process) picks: pid, a per-process random tag, a counter.
fs::path unique_sibling(const fs::path& target, std::string_view kind) {
  static const std::uint64_t process_tag = [] {
    std::random_device device;
    return (static_cast<std::uint64_t>(device()) << 32) ^ device();
  }();
  static std::atomic<std::uint64_t> counter{0};
  std::ostringstream name;
  name << "." << target.filename().string() << "." << kind << "." << ::getpid() << "." << std::hex
       << (process_tag & 0xffffffffu) << "." << counter.fetch_add(1);
  return parent_or_dot(target) / name.str();
}

void fsync_fd(int fd, const fs::path& path) {
  while (::fsync(fd) != 0) {
    if (errno != EINTR) throw_errno("cannot fsync", path, errno);
  }
}

// Closes the descriptor and removes the temp file unless released (on success).
class TempFileGuard {
 public:
  TempFileGuard(int fd, fs::path path) : fd_(fd), path_(std::move(path)) {}
  TempFileGuard(const TempFileGuard&) = delete;
  TempFileGuard& operator=(const TempFileGuard&) = delete;
  ~TempFileGuard() {
    if (fd_ >= 0) ::close(fd_);
    if (!released_) ::unlink(path_.c_str());
  }
  void close_checked() {
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) throw_errno("cannot close", path_, errno);
  }
  void release() { released_ = true; }

 private:
  int fd_;
  fs::path path_;
  bool released_ = false;
};

// The rename replaces whatever the target names: only a regular file (or nothing) may be
// replaced, never a device, FIFO, socket or directory (as root, /dev/null would become a file).
void require_replaceable(const fs::path& target) {
  struct stat st {};
  if (::stat(target.c_str(), &st) != 0) {
    if (errno == ENOENT) return;
    throw_errno("cannot write", target, errno);
  }
  SW_REQUIRE(S_ISREG(st.st_mode), IoError, "cannot write ", quoted(target), ": it is ",
             file_kind_name(st.st_mode), "; an output must be a regular file or not exist");
}

// An output named through a symlink is written where the link points, as a shell's `>` writes:
// renaming onto the link itself would replace the link with a regular file and leave the file
// it names as it was. The temp file then sits next to that file, on its filesystem.
fs::path link_destination(const fs::path& target) {
  fs::path path = target;
  for (int hops = 0; hops < 40; ++hops) {  // Linux's own limit on links in one lookup
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return path;
    std::error_code ec;
    const fs::path next = fs::read_symlink(path, ec);
    if (ec) throw_errno("cannot read link", path, ec.value());
    path = next.is_absolute() ? next : parent_or_dot(path) / next;
  }
  throw_errno("cannot write", target, ELOOP);
}

void fsync_path(const fs::path& path, int flags) {
  const int fd = ::open(path.c_str(), flags | O_CLOEXEC);
  if (fd < 0) throw_errno("cannot open for fsync", path, errno);
  try {
    fsync_fd(fd, path);
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
}

}  // namespace

FileSink::FileSink(int fd, fs::path path_for_errors)
    : fd_(fd), path_(std::move(path_for_errors)), buffer_(kSinkBufferBytes) {}

// Writes at the end of what reached the file so far: everything accepted (total_) less what
// waits in the buffer (both callers account for `data` only after it was written). One pwrite
// per run, straight from the caller's memory; no writeback is started here (sync_file_range after
// each piece made saves slower and erratic on a disk shared with other writers: the writer then
// waits for the device queue): the fsync in write_file_atomic writes the file back at once.
void FileSink::write_fully(const void* data, std::size_t size) {
  const auto* bytes = static_cast<const std::byte*>(data);
  auto offset = static_cast<off_t>(total_ - buffered_);
  while (size > 0) {
    const ssize_t n = ::pwrite(fd_, bytes, size, offset);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw_errno("cannot write", path_, errno);
    if (n == 0) throw IoError(str_cat("cannot write ", quoted(path_), ": pwrite returned 0"));
    bytes += n;
    offset += n;
    size -= static_cast<std::size_t>(n);
  }
}

void FileSink::write(const void* data, std::size_t size) {
  if (size == 0) return;
  if (buffered_ + size > buffer_.size()) {
    flush();
    if (size >= buffer_.size()) {
      write_fully(data, size);  // straight from the caller's memory
      total_ += size;
      return;
    }
  }
  std::memcpy(buffer_.data() + buffered_, data, size);
  buffered_ += size;
  total_ += size;
}

void FileSink::reserve(std::uint64_t total_bytes) {
  if (total_bytes == 0) return;
  // A hint: where it fails (a filesystem without fallocate) the writes allocate as they go.
  const int ignored = ::fallocate(fd_, FALLOC_FL_KEEP_SIZE, 0, static_cast<off_t>(total_bytes));
  static_cast<void>(ignored);
}

void FileSink::flush() {
  if (buffered_ == 0) return;
  write_fully(buffer_.data(), buffered_);
  buffered_ = 0;
}

void fsync_directory(const fs::path& dir) { fsync_path(dir, O_RDONLY | O_DIRECTORY); }

void write_file_atomic(const fs::path& output, const std::function<void(FileSink&)>& write_content,
                       RenameSync rename_sync) {
  SW_REQUIRE(!output.empty() && output.has_filename(), InvalidArgument,
             "write_file_atomic: target path ", quoted(output), " has no file name");
  const fs::path target = link_destination(output);
  require_replaceable(target);
  const fs::path temp = unique_sibling(target, "tmp");
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) throw_errno("cannot create temp file", temp, errno);
  TempFileGuard guard(fd, temp);

  // Keep the permissions of the file being replaced.
  struct stat existing {};
  if (::stat(target.c_str(), &existing) == 0 && S_ISREG(existing.st_mode)) {
    if (::fchmod(fd, existing.st_mode & 07777) != 0) throw_errno("cannot chmod", temp, errno);
  }

  FileSink sink(fd, target);
  write_content(sink);
  sink.flush();
  fsync_fd(fd, temp);
  guard.close_checked();
  require_replaceable(target);  // again: the content may have taken long
  if (::rename(temp.c_str(), target.c_str()) != 0) {
    const int err = errno;
    throw IoError(
        str_cat("cannot rename ", quoted(temp), " to ", quoted(target), ": ", std::strerror(err)));
  }
  guard.release();
  if (rename_sync == RenameSync::kNow) fsync_directory(parent_or_dot(target));
}

void write_file_atomic(const fs::path& target, std::string_view content, RenameSync rename_sync) {
  write_file_atomic(
      target, [content](FileSink& sink) { sink.write(content); }, rename_sync);
}

void replace_pointer_file(const fs::path& target, std::string_view value) {
  SW_REQUIRE(value.find('\n') == std::string_view::npos, InvalidArgument, "pointer file ",
             quoted(target), ": value must be one line");
  write_file_atomic(target, [value](FileSink& sink) {
    sink.write(value);
    sink.write("\n");
  });
}

std::optional<std::string> read_pointer_file(const fs::path& path) {
  struct stat entry {};
  if (::lstat(path.c_str(), &entry) != 0 && errno == ENOENT) return std::nullopt;
  // A pointer is one short line: a FIFO or /dev/zero in its place must not hang the reader.
  std::string text = read_input_file(path, "pointer file", kPointerFileMaxBytes);
  const auto is_space = [](char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; };
  std::size_t begin = 0;
  std::size_t end = text.size();
  while (begin < end && is_space(text[begin])) ++begin;
  while (end > begin && is_space(text[end - 1])) --end;
  return text.substr(begin, end - begin);
}

fs::path create_temp_directory_next_to(const fs::path& target) {
  SW_REQUIRE(!target.empty() && target.has_filename(), InvalidArgument,
             "create_temp_directory_next_to: target path ", quoted(target),
             " has no final component");
  for (int attempt = 0; attempt < 100; ++attempt) {
    const fs::path dir = unique_sibling(target, "staging");
    if (::mkdir(dir.c_str(), 0777) == 0) return dir;
    if (errno != EEXIST) throw_errno("cannot create directory", dir, errno);
  }
  throw IoError(str_cat("cannot find a free temp directory name next to ", quoted(target)));
}

void commit_directory(const fs::path& staged, const fs::path& target, bool replace_existing,
                      StagedFiles staged_files) {
  std::error_code ec;
  SW_REQUIRE(fs::is_directory(staged, ec), IoError, "commit_directory: ", quoted(staged),
             " is not a directory");
  SW_REQUIRE(!target.empty() && target.has_filename(), InvalidArgument,
             "commit_directory: target path ", quoted(target), " has no final component");

  // Everything inside must be on disk before the rename makes it visible.
  for (auto it = fs::recursive_directory_iterator(staged); it != fs::recursive_directory_iterator();
       ++it) {
    if (it->is_symlink()) continue;
    if (it->is_directory()) {
      fsync_directory(it->path());
    } else if (staged_files == StagedFiles::kUnsynced && it->is_regular_file()) {
      fsync_path(it->path(), O_RDONLY);
    }
  }
  fsync_directory(staged);

  const bool target_exists = fs::exists(fs::symlink_status(target, ec));
  if (target_exists && !replace_existing) {
    throw IoError(
        str_cat("cannot commit ", quoted(staged), ": target ", quoted(target), " already exists"));
  }
  if (target_exists) {
    // Only a directory is replaced: the swapped-out target is removed below, which must never
    // take a regular file, device or FIFO with it.
    struct stat st {};
    SW_REQUIRE(::stat(target.c_str(), &st) == 0 && S_ISDIR(st.st_mode), IoError, "cannot commit ",
               quoted(staged), ": target ", quoted(target), " exists and is not a directory");
    // Atomic swap: target names the new directory, staged the old one, which is then removed.
    if (::renameat2(AT_FDCWD, staged.c_str(), AT_FDCWD, target.c_str(), RENAME_EXCHANGE) != 0) {
      const int err = errno;
      throw IoError(str_cat("cannot exchange ", quoted(staged), " with ", quoted(target), ": ",
                            std::strerror(err)));
    }
    fsync_directory(parent_or_dot(target));
    fs::remove_all(staged, ec);
    if (ec) {
      throw IoError(str_cat("committed ", quoted(target), " but cannot remove the old content at ",
                            quoted(staged), ": ", ec.message()));
    }
  } else {
    // RENAME_NOREPLACE: a plain rename would silently replace an empty directory created by a
    // concurrent writer in the meantime.
    int rc = ::renameat2(AT_FDCWD, staged.c_str(), AT_FDCWD, target.c_str(), RENAME_NOREPLACE);
    if (rc != 0 && errno == EINVAL) rc = ::rename(staged.c_str(), target.c_str());
    if (rc != 0) {
      const int err = errno;
      throw IoError(str_cat("cannot rename ", quoted(staged), " to ", quoted(target), ": ",
                            std::strerror(err)));
    }
  }
  fsync_directory(parent_or_dot(target));
  if (parent_or_dot(staged) != parent_or_dot(target)) fsync_directory(parent_or_dot(staged));
}

}  // namespace shardwise
