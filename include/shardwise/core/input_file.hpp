// Opening the files the project reads: every one must be a regular file of a plausible size. A
// FIFO blocks a reader forever, /dev/zero (or a symlink to it) is read until memory runs out, and
// a directory opens as an empty stream; each is refused with a message naming the file, what it
// is and what it was read as ("checkpoint pointer '.../latest' is a FIFO (named pipe)").
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <limits>
#include <string>
#include <string_view>

namespace shardwise {

// Size limits of the files read whole into memory, far above anything a real job writes (a
// model spec of 1M params is about 110 MB).
inline constexpr std::uint64_t kPointerFileMaxBytes = std::uint64_t{4} << 10;  // `latest`
// A config is a few KB; yaml-cpp reads about 1 MB/s (twice: the alias check), so 1 MiB.
inline constexpr std::uint64_t kConfigFileMaxBytes = std::uint64_t{1} << 20;     // YAML config
inline constexpr std::uint64_t kManifestFileMaxBytes = std::uint64_t{1} << 30;   // checkpoint.json
inline constexpr std::uint64_t kModelSpecFileMaxBytes = std::uint64_t{1} << 30;  // model spec JSON
inline constexpr std::uint64_t kNoSizeLimit = std::numeric_limits<std::uint64_t>::max();

// What a file of this st_mode is, for messages: "a directory", "a FIFO (named pipe)",
// "a character device", "a block device", "a socket", "a regular file", ...
std::string_view file_kind_name(mode_t mode);

// A read-only descriptor of a regular file, closed on destruction.
class InputFile {
 public:
  // Opens `path` (following symlinks) with O_NONBLOCK, so that a FIFO without a writer cannot
  // block the open, and fstat()s the descriptor itself (no race with a rename in between).
  // Throws IoError "<what> 'PATH' ..." when it does not exist, cannot be opened (a symlink loop,
  // no permission), is not a regular file, or is larger than `max_bytes`.
  static InputFile open(const std::filesystem::path& path, std::string_view what,
                        std::uint64_t max_bytes);

  InputFile(InputFile&& other) noexcept;
  InputFile& operator=(InputFile&& other) noexcept;
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;
  ~InputFile();

  int fd() const { return fd_; }
  // The size fstat() reported at open.
  std::uint64_t size() const { return size_; }
  // Hands the descriptor over to the caller, who closes it.
  int release();

 private:
  InputFile(int fd, std::uint64_t size) : fd_(fd), size_(size) {}
  int fd_ = -1;
  std::uint64_t size_ = 0;
};

// The whole content of a regular file of at most `max_bytes` (checked at open and again while
// reading, for a file that grows or reports size 0 as /proc files do). Errors as InputFile::open.
std::string read_input_file(const std::filesystem::path& path, std::string_view what,
                            std::uint64_t max_bytes);

}  // namespace shardwise
