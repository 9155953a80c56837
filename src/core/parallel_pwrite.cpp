#include "parallel_pwrite.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "shardwise/core/error.hpp"

namespace shardwise::core_detail {

namespace {

// Writes one piece fully (pwrite may write less than asked) and starts its writeback. The
// writeback request is only a hint: durability comes from the caller's fsync, so its failure
// loses nothing but the overlap.
void write_piece(int fd, const std::filesystem::path& path, const std::byte* data,
                 std::size_t size, std::uint64_t offset) {
  const std::uint64_t start = offset;
  while (size > 0) {
    const ssize_t n = ::pwrite(fd, data, size, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      throw IoError(str_cat("cannot write '", path.string(), "': ",
                            n < 0 ? std::strerror(errno) : "pwrite returned 0"));
    }
    data += n;
    offset += static_cast<std::uint64_t>(n);
    size -= static_cast<std::size_t>(n);
  }
  ::sync_file_range(fd, static_cast<off_t>(start), static_cast<off_t>(offset - start),
                    SYNC_FILE_RANGE_WRITE);
}

// Threads for `pieces` pieces: one per core (copying is CPU work), at most kMaxWriterThreads.
unsigned writer_threads(std::size_t pieces) {
  static const unsigned cores = std::max(1u, std::thread::hardware_concurrency());  // reads /sys
  return static_cast<unsigned>(
      std::min<std::size_t>(pieces, std::min(cores, kMaxWriterThreads)));
}

}  // namespace

void pwrite_in_parallel(int fd, const std::filesystem::path& path, const void* data,
                        std::size_t size, std::uint64_t offset) {
  const auto* bytes = static_cast<const std::byte*>(data);
  const std::size_t pieces = (size + kWritePieceBytes - 1) / kWritePieceBytes;
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr failure;
  std::mutex failure_mutex;
  // Each thread takes the next unwritten piece until none is left or one of them failed.
  const auto work = [&] {
    try {
      for (std::size_t i = next++; i < pieces && !failed; i = next++) {
        const std::size_t begin = i * kWritePieceBytes;
        write_piece(fd, path, bytes + begin, std::min(kWritePieceBytes, size - begin),
                    offset + begin);
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(failure_mutex);
      if (!failure) failure = std::current_exception();
      failed = true;
    }
  };
  std::vector<std::jthread> helpers;
  for (unsigned t = 1; t < writer_threads(pieces); ++t) helpers.emplace_back(work);
  work();
  helpers.clear();  // joins
  if (failure) std::rethrow_exception(failure);
}

}  // namespace shardwise::core_detail
