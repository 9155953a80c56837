#include "output_preflight.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "shardwise/core/error.hpp"
#include "shardwise/core/message_text.hpp"

namespace shardwise::cli {

std::filesystem::path output_parent(const std::filesystem::path& path) {
  return path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
}

void probe_output_directory(const std::filesystem::path& directory, std::string_view option) {
  const std::string shown = printable(directory.string(), 4096);
  std::error_code ec;
  SW_REQUIRE(std::filesystem::is_directory(directory, ec), IoError, option, ": directory ", shown,
             " does not exist");
  const std::filesystem::path probe =
      directory / str_cat(".shardwise-probe-", ::getpid(), "-", ::gettid());
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  SW_REQUIRE(fd >= 0, IoError, option, ": cannot create files in ", shown, ": ",
             std::strerror(errno));
  const char byte = 0;
  const bool written = ::write(fd, &byte, 1) == 1;
  const int write_errno = errno;
  ::close(fd);
  ::unlink(probe.c_str());
  SW_REQUIRE(written, IoError, option, ": cannot write files in ", shown, ": ",
             std::strerror(write_errno));
}

}  // namespace shardwise::cli
