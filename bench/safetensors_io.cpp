// safetensors save/load throughput next to plain write()/read() of the same bytes in the same
// directory, measured side by side in one run.
//
//   bench_safetensors_io [dir=/tmp] [megabytes=256] [repeats=3]
//
// Save = SafetensorsWriter::write_atomic (temp file, fsync, rename, directory fsync); baselines:
// write() of the same tensors into a new file + fsync ("save"), and the same bytes through the
// temp file + fsync + rename + directory fsync sequence without the format ("save vs
// tmp+rename"), which separates the format's cost from the cost of crash safety. Load =
// SafetensorsFile::open + read_range of every whole tensor into caller buffers; its baseline
// read()s the raw file into the same buffers. Loads are measured warm (page cache) and cold (the
// file's pages dropped with posix_fadvise(DONTNEED) first; whether that reaches the device
// depends on the filesystem). Each figure is the best of the repeats, runs interleaved.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "bench_harness.hpp"
#include "shardwise/checkpoint/safetensors.hpp"
#include "shardwise/core/error.hpp"

namespace {

using shardwise::DType;
namespace fs = std::filesystem;

struct Tensor {
  std::string name;
  DType dtype;
  std::vector<std::int64_t> shape;
  std::vector<std::byte> bytes;
};

using shardwise::bench::best;
using shardwise::bench::check_syscall;
using shardwise::bench::seconds_of;

void write_tensors(int fd, const fs::path& path, const std::vector<Tensor>& tensors) {
  for (const Tensor& t : tensors) {
    std::size_t done = 0;
    while (done < t.bytes.size()) {
      const ssize_t n = ::write(fd, t.bytes.data() + done, t.bytes.size() - done);
      check_syscall(n > 0, "write", path);
      done += static_cast<std::size_t>(n);
    }
  }
  check_syscall(::fsync(fd) == 0, "fsync", path);
  ::close(fd);
}

// Plain baseline: a fresh file each time (the old one is removed inside the timed region, as
// the atomic path frees the old file at rename), write(), fsync.
void raw_write(const fs::path& path, const std::vector<Tensor>& tensors) {
  fs::remove(path);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  check_syscall(fd >= 0, "open", path);
  write_tensors(fd, path, tensors);
}

// Atomic baseline: the same syscalls as core/atomic_file without the safetensors format (new
// file next to the old one, fsync, rename over it, directory fsync). Separates the cost of the
// format from the cost of crash safety.
void raw_write_atomic(const fs::path& path, const std::vector<Tensor>& tensors) {
  const fs::path temp = path.string() + ".tmp";
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  check_syscall(fd >= 0, "open", temp);
  write_tensors(fd, temp, tensors);
  check_syscall(::rename(temp.c_str(), path.c_str()) == 0, "rename", temp);
  const int dir_fd = ::open(path.parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  check_syscall(dir_fd >= 0, "open", path.parent_path());
  check_syscall(::fsync(dir_fd) == 0, "fsync", path.parent_path());
  ::close(dir_fd);
}

void raw_read(const fs::path& path, std::vector<std::vector<std::byte>>& out) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  check_syscall(fd >= 0, "open", path);
  for (auto& buffer : out) {
    std::size_t done = 0;
    while (done < buffer.size()) {
      const ssize_t n = ::read(fd, buffer.data() + done, buffer.size() - done);
      check_syscall(n > 0, "read", path);
      done += static_cast<std::size_t>(n);
    }
  }
  ::close(fd);
}

void safetensors_read(const fs::path& path, const std::vector<Tensor>& tensors,
                      std::vector<std::vector<std::byte>>& out) {
  const auto file = shardwise::SafetensorsFile::open(path);
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    file.read_range(tensors[i].name, 0, file.info(tensors[i].name).numel(), out[i].data());
  }
}

void drop_cache(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  check_syscall(fd >= 0, "open", path);
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

int run(int argc, char** argv) {
  const fs::path dir = argc > 1 ? fs::path(argv[1]) : fs::path("/tmp");
  const std::size_t megabytes = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 256;
  const int repeats = argc > 3 ? std::max(1, std::atoi(argv[3])) : 3;
  const std::size_t total = megabytes << 20;

  // A model-like mix: mostly large fp32/bf16 matrices plus small fp32 vectors.
  std::vector<Tensor> tensors;
  std::size_t bytes = 0;
  for (int i = 0; bytes < total; ++i) {
    const bool bf16 = i % 2 == 1;
    const std::int64_t rows = 1024;
    const std::int64_t cols = bf16 ? 2048 : 1024;  // 4 MiB either way
    Tensor matrix{shardwise::str_cat("layers.", i, ".weight"),
                  bf16 ? DType::kBFloat16 : DType::kFloat32,
                  {rows, cols},
                  std::vector<std::byte>(4u << 20)};
    Tensor bias{shardwise::str_cat("layers.", i, ".bias"),
                DType::kFloat32,
                {1024},
                std::vector<std::byte>(4096)};
    for (Tensor* t : {&matrix, &bias}) {
      for (std::size_t k = 0; k < t->bytes.size(); ++k) {
        t->bytes[k] = static_cast<std::byte>((k * 131 + static_cast<std::size_t>(i)) & 0xff);
      }
      bytes += t->bytes.size();
      tensors.push_back(std::move(*t));
    }
  }
  std::vector<std::vector<std::byte>> out;
  for (const Tensor& t : tensors) out.emplace_back(t.bytes.size());

  const fs::path raw_path = dir / shardwise::str_cat("bench_raw_", ::getpid(), ".bin");
  const fs::path st_path = dir / shardwise::str_cat("bench_st_", ::getpid(), ".safetensors");
  shardwise::SafetensorsWriter writer;
  for (const Tensor& t : tensors) writer.add(t.name, t.dtype, t.shape, std::span(t.bytes));

  const fs::path raw_atomic_path =
      dir / shardwise::str_cat("bench_raw_atomic_", ::getpid(), ".bin");
  std::vector<double> raw_save, raw_atomic_save, st_save, raw_warm, st_warm, raw_cold, st_cold;
  for (int r = 0; r < repeats; ++r) {
    raw_save.push_back(seconds_of([&] { raw_write(raw_path, tensors); }));
    st_save.push_back(seconds_of([&] { writer.write_atomic(st_path); }));
    raw_atomic_save.push_back(seconds_of([&] { raw_write_atomic(raw_atomic_path, tensors); }));
    raw_warm.push_back(seconds_of([&] { raw_read(raw_path, out); }));
    st_warm.push_back(seconds_of([&] { safetensors_read(st_path, tensors, out); }));
    drop_cache(raw_path);
    raw_cold.push_back(seconds_of([&] { raw_read(raw_path, out); }));
    drop_cache(st_path);
    st_cold.push_back(seconds_of([&] { safetensors_read(st_path, tensors, out); }));
  }
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (out[i] != tensors[i].bytes) {
      std::fprintf(stderr, "loaded tensor %s differs from what was saved\n",
                   tensors[i].name.c_str());
      return 1;
    }
  }
  const double file_bytes = static_cast<double>(fs::file_size(st_path));
  fs::remove(raw_path);
  fs::remove(raw_atomic_path);
  fs::remove(st_path);

  std::printf(
      "safetensors I/O: %zu tensors, %.1f MiB of data (file %.1f MiB), dir %s, "
      "best of %d\n",
      tensors.size(), static_cast<double>(bytes) / (1 << 20), file_bytes / (1 << 20), dir.c_str(),
      repeats);
  std::printf("%-20s %16s %16s %8s\n", "", "safetensors MB/s", "raw MB/s", "ratio");
  const auto row = [&](const char* what, const std::vector<double>& ours,
                       const std::vector<double>& raw) {
    const double ours_rate = static_cast<double>(bytes) / best(ours) / 1e6;
    const double raw_rate = static_cast<double>(bytes) / best(raw) / 1e6;
    std::printf("%-20s %16.1f %16.1f %8.3f\n", what, ours_rate, raw_rate, ours_rate / raw_rate);
  };
  row("save", st_save, raw_save);
  row("save vs tmp+rename", st_save, raw_atomic_save);
  row("load warm", st_warm, raw_warm);
  row("load cold", st_cold, raw_cold);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_safetensors_io: %s\n", e.what());
    return 2;
  }
}
