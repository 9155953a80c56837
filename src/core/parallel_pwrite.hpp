// Large file writes spread over a few threads: copying bytes into the page cache is CPU work,
// which a second core shares, while the disk writes back what was copied so far.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>

namespace shardwise::core_detail {

// Pieces of at most this size are written with one pwrite(2) each, and the kernel is asked to
// start writing each piece to the disk at once (sync_file_range): the disk works while the rest
// is copied, and the final fsync finds little left to do.
inline constexpr std::size_t kWritePieceBytes = std::size_t{8} << 20;

// Writes the `size` bytes at `data` to `fd` at byte `offset` (the file position is not used or
// moved), in pieces of kWritePieceBytes spread over up to kMaxWriterThreads threads (the calling
// thread included) when there are several pieces. Returns once every byte is written; throws
// IoError naming `path` (the first failure; the other threads stop at their next piece).
void pwrite_in_parallel(int fd, const std::filesystem::path& path, const void* data,
                        std::size_t size, std::uint64_t offset);

inline constexpr unsigned kMaxWriterThreads = 4;

}  // namespace shardwise::core_detail
