#include "shardwise/core/output_preflight.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "shardwise/core/error.hpp"
#include "shardwise/core/input_file.hpp"
#include "shardwise/core/message_text.hpp"

namespace shardwise {

namespace fs = std::filesystem;

namespace {

[[noreturn]] void refuse(std::string_view option, const fs::path& path, const std::string& why) {
  throw IoError(str_cat(option, " '", printable(path.string(), 4096), "' is not writable: ", why,
                        " (checked before starting, so no work is lost)"));
}

// Creates, fills and removes a hidden probe file in `dir`.
void probe_directory(const fs::path& dir, std::string_view option, const fs::path& shown) {
  const fs::path probe = dir / str_cat(".shardwise-write-probe.", ::getpid(), ".", ::gettid());
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0)
    refuse(option, shown,
           str_cat("cannot create files in ", printable(dir.string(), 4096), ": ",
                   std::strerror(errno)));
  // A few KiB: on a full filesystem creating an empty file can still succeed.
  const std::string bytes(4096, '\n');
  const ssize_t n = ::write(fd, bytes.data(), bytes.size());
  const int write_error = errno;
  const bool closed = ::close(fd) == 0;
  ::unlink(probe.c_str());
  if (n != static_cast<ssize_t>(bytes.size())) {
    refuse(option, shown,
           str_cat("writing to ", printable(dir.string(), 4096),
                   " fails: ", n < 0 ? std::strerror(write_error) : "short write"));
  }
  if (!closed) refuse(option, shown, str_cat("closing a file in ", dir.string(), " fails"));
}

}  // namespace

void preflight_output_file(const fs::path& file, std::string_view option) {
  SW_REQUIRE(!file.empty() && file.has_filename(), IoError, option, " '", file.string(),
             "' does not name a file");
  // Only a regular file may be replaced: the writers rename a new file over the path, which
  // would turn a device (/dev/null, as root), FIFO or socket into a plain file.
  struct stat st {};
  const bool exists = ::stat(file.c_str(), &st) == 0;
  if (!exists && errno != ENOENT) refuse(option, file, std::strerror(errno));
  if (exists && S_ISDIR(st.st_mode)) refuse(option, file, "it is a directory");
  if (exists && !S_ISREG(st.st_mode)) {
    refuse(option, file,
           str_cat("it is ", file_kind_name(st.st_mode),
                   "; an output must be a regular file or not exist"));
  }
  const fs::path dir = file.has_parent_path() ? file.parent_path() : fs::path(".");
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    refuse(option, file, str_cat("its directory ", dir.string(), " does not exist"));
  }
  probe_directory(dir, option, file);
  if (exists) {
    // No O_TRUNC: leave it as it is.
    const int fd = ::open(file.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) refuse(option, file, std::strerror(errno));
    ::close(fd);
  }
}

void preflight_output_directory(const fs::path& dir, std::string_view option) {
  std::error_code ec;
  SW_REQUIRE(!dir.empty(), IoError, option, ": empty directory name");
  struct stat st {};
  if (::stat(dir.c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) {
    refuse(option, dir, str_cat("it is ", file_kind_name(st.st_mode), ", not a directory"));
  }
  fs::create_directories(dir, ec);
  std::error_code status_ec;
  if (!fs::is_directory(dir, status_ec)) {
    refuse(option, dir,
           ec ? str_cat("cannot create it: ", ec.message())
              : std::string("it exists and is not a directory"));
  }
  probe_directory(dir, option, dir);
}

}  // namespace shardwise
