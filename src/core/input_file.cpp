#include "shardwise/core/input_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "shardwise/core/error.hpp"
#include "shardwise/core/message_text.hpp"

namespace shardwise {

namespace {

std::string input_named(std::string_view what, const std::filesystem::path& path) {
  return str_cat(what, " '", printable(path.string(), 4096), "'");
}

[[noreturn]] void refuse_open(std::string_view what, const std::filesystem::path& path, int err) {
  if (err == ENOENT) throw IoError(str_cat(input_named(what, path), " does not exist"));
  throw IoError(str_cat("cannot open ", input_named(what, path), ": ", std::strerror(err)));
}

// Refuses anything but a regular file of at most max_bytes.
void require_plausible(const struct stat& st, std::string_view what,
                       const std::filesystem::path& path, std::uint64_t max_bytes) {
  SW_REQUIRE(S_ISREG(st.st_mode), IoError, input_named(what, path), " is ",
             file_kind_name(st.st_mode), ", not a regular file");
  const auto size = static_cast<std::uint64_t>(st.st_size);
  SW_REQUIRE(size <= max_bytes, IoError, input_named(what, path), " is ", size,
             " bytes, more than any ", what, " (limit ", max_bytes, " bytes)");
}

}  // namespace

std::string_view file_kind_name(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "not a regular file";
}

InputFile InputFile::open(const std::filesystem::path& path, std::string_view what,
                          std::uint64_t max_bytes) {
  // stat first: a device or FIFO is refused without opening it (opening some devices acts).
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) refuse_open(what, path, errno);
  require_plausible(st, what, path, max_bytes);
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) refuse_open(what, path, errno);
  InputFile file(fd, 0);
  // Again on what was opened: the path may name something else by now.
  if (::fstat(fd, &st) != 0) {
    throw IoError(str_cat("cannot stat ", input_named(what, path), ": ", std::strerror(errno)));
  }
  require_plausible(st, what, path, max_bytes);
  file.size_ = static_cast<std::uint64_t>(st.st_size);
  return file;
}

InputFile::InputFile(InputFile&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), size_(other.size_) {}

InputFile& InputFile::operator=(InputFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    size_ = other.size_;
  }
  return *this;
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

int InputFile::release() { return std::exchange(fd_, -1); }

std::string read_input_file(const std::filesystem::path& path, std::string_view what,
                            std::uint64_t max_bytes) {
  const InputFile file = InputFile::open(path, what, max_bytes);
  std::string text;
  text.reserve(static_cast<std::size_t>(file.size()));
  char chunk[65536];
  for (;;) {
    const ssize_t n = ::read(file.fd(), chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      throw IoError(str_cat("cannot read ", input_named(what, path), ": ", std::strerror(errno)));
    if (n == 0) break;
    SW_REQUIRE(text.size() + static_cast<std::uint64_t>(n) <= max_bytes, IoError,
               input_named(what, path), " grew past ", max_bytes,
               " bytes while it was read; more than any ", what);
    text.append(chunk, static_cast<std::size_t>(n));
  }
  return text;
}

}  // namespace shardwise
