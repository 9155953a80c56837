// Crash-safe writes: a reader (or a restart after a crash) sees either the old content of a path
// or the complete new content, never a partial file.
//
// Files: the content goes to a temp file in the target's directory (same filesystem, so rename is
// atomic), the temp file is fsync'ed, renamed over the target, and the directory is fsync'ed so
// the rename itself survives a power loss. On any failure (including an exception thrown by the
// caller's content callback) the temp file is removed and the target is untouched.
//
// Directories: build a whole directory under a temp name (create_temp_directory_next_to), then
// commit_directory() fsyncs every file in it and renames it into place.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace shardwise {

// Where the content callback of write_file_atomic writes. Small writes are buffered; large ones
// go straight from the caller's memory to the file with one pwrite each (no extra copy).
class FileSink {
 public:
  FileSink(int fd, std::filesystem::path path_for_errors);
  FileSink(const FileSink&) = delete;
  FileSink& operator=(const FileSink&) = delete;

  void write(const void* data, std::size_t size);
  void write(std::string_view text) { write(text.data(), text.size()); }
  // Allocates disk space for a file of `total_bytes` up front (fallocate, file size unchanged):
  // the filesystem then finds one run of free blocks at once, instead of searching for blocks
  // piece by piece as the pages are written back. Only a hint: where the filesystem cannot,
  // nothing changes; a file that ends up shorter just keeps the spare blocks.
  void reserve(std::uint64_t total_bytes);
  // Bytes accepted so far.
  std::size_t bytes_written() const { return total_; }
  // Pushes buffered bytes to the file descriptor (called by write_file_atomic before fsync).
  void flush();

 private:
  void write_fully(const void* data, std::size_t size);

  int fd_;
  std::filesystem::path path_;
  std::vector<std::byte> buffer_;
  std::size_t buffered_ = 0;
  std::size_t total_ = 0;
};

// When write_file_atomic makes the rename itself durable: at once (fsync of the directory), or
// later by the caller, who writes several files into a staging directory and commits it with
// commit_directory (which fsyncs the directory once before publishing it).
enum class RenameSync { kNow, kByCommit };

// Writes `target` atomically with the bytes that `write_content` streams into the sink.
// New files get mode 0666 & ~umask; an existing target's permission bits are kept. A `target`
// that is a symlink is followed: the file it names is replaced, the link stays.
// Throws IoError naming the path on any filesystem failure; exceptions from `write_content`
// propagate unchanged after the temp file has been removed.
void write_file_atomic(const std::filesystem::path& target,
                       const std::function<void(FileSink&)>& write_content,
                       RenameSync rename_sync = RenameSync::kNow);

// Same, with the content given in memory.
void write_file_atomic(const std::filesystem::path& target, std::string_view content,
                       RenameSync rename_sync = RenameSync::kNow);

// Atomically replaces a small "pointer" file (e.g. `latest` naming the newest checkpoint
// directory) with `value` followed by a newline.
void replace_pointer_file(const std::filesystem::path& target, std::string_view value);

// Reads a pointer file written by replace_pointer_file: its content without surrounding
// whitespace, or nullopt when the file does not exist. Throws IoError when it cannot be read.
std::optional<std::string> read_pointer_file(const std::filesystem::path& path);

// Creates a fresh, empty directory next to `target` (same parent, hidden temp name) in which a
// caller can build content before commit_directory(). The parent must exist.
std::filesystem::path create_temp_directory_next_to(const std::filesystem::path& target);

// What commit_directory may assume about the regular files under the staged directory: nothing
// (it fsyncs each), or that each was already fsynced by its writer (write_file_atomic does so
// before returning), which saves one device flush per file.
enum class StagedFiles { kUnsynced, kSynced };

// Makes the temp directory `staged` (on the same filesystem) durable and moves it to `target`:
// fsyncs every regular file (unless kSynced) and directory under it, renames it, and fsyncs
// target's parent. If `target` exists: with replace_existing=false this throws IoError and
// leaves both alone; with replace_existing=true the two are swapped atomically (renameat2
// RENAME_EXCHANGE) and the old content is then removed, so `target` always names a complete
// directory.
void commit_directory(const std::filesystem::path& staged, const std::filesystem::path& target,
                      bool replace_existing = false,
                      StagedFiles staged_files = StagedFiles::kUnsynced);

// fsyncs a directory (so that entries created, renamed or removed in it are durable).
void fsync_directory(const std::filesystem::path& dir);

}  // namespace shardwise
