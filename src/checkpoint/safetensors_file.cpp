// Memory-mapped safetensors reader: open() reads and validates the header only; tensor bytes
// are paged in from the mapping when touched, so a rank reading its ranges reads only those.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>
#include <utility>

#include "shardwise/checkpoint/safetensors.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/core/input_file.hpp"
#include "shardwise/core/message_text.hpp"

namespace shardwise {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; a big-endian host needs byte swapping");

namespace {

// Closes a descriptor on every path out of open().
struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd >= 0) ::close(fd);
  }
};

// Ranges from this size on are pread() into the destination: one copy from the page cache, no
// page faults on the mapping (a fault per 4 KiB page made loads ~5x slower than read()).
constexpr std::size_t kPreadMinBytes = std::size_t{64} << 10;

void pread_fully(int fd, std::byte* dst, std::size_t nbytes, off_t offset,
                 const std::filesystem::path& path) {
  while (nbytes > 0) {
    // Linux caps a single read at ~2 GiB; ask for at most 1 GiB at a time.
    const std::size_t chunk = std::min<std::size_t>(nbytes, std::size_t{1} << 30);
    const ssize_t n = ::pread(fd, dst, chunk, offset);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      throw IoError(str_cat("cannot read safetensors file '", printable(path.string(), 4096), "': ",
                            n < 0 ? std::strerror(errno) : "the file shrank after it was opened"));
    }
    dst += n;
    offset += n;
    nbytes -= static_cast<std::size_t>(n);
  }
}

}  // namespace

SafetensorsFile SafetensorsFile::open(const std::filesystem::path& path) {
  const std::string name = printable(path.string(), 4096);  // for messages
  // A regular file (a FIFO would block the open, /dev/zero has no end); mapped whatever its size.
  InputFile input = InputFile::open(path, "safetensors file", kNoSizeLimit);
  FdCloser closer{input.release()};
  const int fd = closer.fd;
  const auto file_bytes = input.size();
  if (file_bytes < 8) {
    throw FormatError(str_cat("safetensors file '", name, "': truncated: ", file_bytes,
                              " bytes, shorter than the 8-byte header length"));
  }
  SW_REQUIRE(file_bytes <= std::numeric_limits<std::size_t>::max(), IoError, "safetensors file '",
             name, "' is too large to map");

  SafetensorsFile file;
  file.path_ = path;
  file.fd_ = std::exchange(closer.fd, -1);  // the file owns it from here
  file.mapping_bytes_ = static_cast<std::size_t>(file_bytes);
  file.mapping_ = ::mmap(nullptr, file.mapping_bytes_, PROT_READ, MAP_PRIVATE, fd, 0);
  if (file.mapping_ == MAP_FAILED) {
    file.mapping_ = nullptr;
    throw IoError(str_cat("cannot map safetensors file '", name, "': ", std::strerror(errno)));
  }
  const auto* bytes = static_cast<const std::byte*>(file.mapping_);

  std::uint64_t header_bytes = 0;
  std::memcpy(&header_bytes, bytes, 8);  // little-endian host (static_assert above)
  if (header_bytes > kSafetensorsMaxHeaderBytes) {
    throw FormatError(str_cat("safetensors file '", name, "': header length ", header_bytes,
                              " exceeds the limit of ", kSafetensorsMaxHeaderBytes, " bytes"));
  }
  if (header_bytes > file_bytes - 8) {
    throw FormatError(str_cat("safetensors file '", name, "': truncated: header length ",
                              header_bytes, " reaches past the end of the file (", file_bytes,
                              " bytes)"));
  }
  file.header_bytes_ = header_bytes;
  file.data_bytes_ = file_bytes - 8 - header_bytes;
  file.data_ = bytes + 8 + header_bytes;

  const std::string_view header_json(reinterpret_cast<const char*>(bytes + 8),
                                     static_cast<std::size_t>(header_bytes));
  SafetensorsHeader header = parse_safetensors_header(header_json, file.data_bytes_, path.string());
  file.tensors_ = std::move(header.tensors);
  file.metadata_ = std::move(header.metadata);
  file.index_.reserve(file.tensors_.size());
  for (std::size_t i = 0; i < file.tensors_.size(); ++i) {
    file.index_.emplace(file.tensors_[i].name, i);
  }
  return file;
}

SafetensorsFile::SafetensorsFile(SafetensorsFile&& other) noexcept { *this = std::move(other); }

SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&& other) noexcept {
  if (this != &other) {
    unmap();
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
    mapping_ = std::exchange(other.mapping_, nullptr);
    mapping_bytes_ = std::exchange(other.mapping_bytes_, 0);
    data_ = std::exchange(other.data_, nullptr);
    header_bytes_ = std::exchange(other.header_bytes_, 0);
    data_bytes_ = std::exchange(other.data_bytes_, 0);
    tensors_ = std::move(other.tensors_);
    index_ = std::move(other.index_);
    metadata_ = std::move(other.metadata_);
  }
  return *this;
}

SafetensorsFile::~SafetensorsFile() { unmap(); }

void SafetensorsFile::unmap() noexcept {
  if (mapping_ != nullptr) ::munmap(mapping_, mapping_bytes_);
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  mapping_ = nullptr;
  mapping_bytes_ = 0;
  data_ = nullptr;
}

bool SafetensorsFile::contains(std::string_view name) const {
  return index_.find(std::string(name)) != index_.end();
}

const SafetensorsTensorInfo& SafetensorsFile::info(std::string_view name) const {
  const auto it = index_.find(std::string(name));
  if (it == index_.end()) {
    throw FormatError(str_cat("safetensors file '", printable(path_.string(), 4096),
                              "' has no tensor '", printable(name), "' (it holds ", tensors_.size(),
                              " tensors)"));
  }
  return tensors_[it->second];
}

SafetensorsTensorView SafetensorsFile::tensor(std::string_view name) const {
  const SafetensorsTensorInfo& i = info(name);
  return {&i, data_ + i.data_begin};
}

void SafetensorsFile::read_range(std::string_view name, std::int64_t element_offset,
                                 std::int64_t count, void* dst) const {
  const SafetensorsTensorInfo& i = info(name);
  const std::int64_t numel = i.numel();
  SW_REQUIRE(element_offset >= 0 && count >= 0 && element_offset <= numel &&
                 count <= numel - element_offset,
             InvalidArgument, "safetensors file '", printable(path_.string(), 4096), "': range [",
             element_offset, ", ", element_offset + count, ") is outside tensor '", printable(name),
             "' of ", numel, " elements");
  if (count == 0) return;
  SW_REQUIRE(dst != nullptr, InvalidArgument, "read_range of tensor '", printable(name),
             "' into a null destination");
  const std::size_t size = dtype_size(i.dtype);
  const std::byte* src = data_ + i.data_begin + static_cast<std::size_t>(element_offset) * size;
  const std::size_t nbytes = static_cast<std::size_t>(count) * size;
  if (nbytes < kPreadMinBytes) {
    std::memcpy(dst, src, nbytes);
    return;
  }
  pread_fully(fd_, static_cast<std::byte*>(dst), nbytes,
              static_cast<off_t>(src - data_) + static_cast<off_t>(8 + header_bytes_), path_);
}

void SafetensorsFile::read_range(std::string_view name, std::int64_t element_offset,
                                 TensorView dst) const {
  const SafetensorsTensorInfo& i = info(name);
  SW_REQUIRE(dst.dtype == i.dtype, ShapeError, "safetensors file '",
             printable(path_.string(), 4096), "': tensor '", printable(name), "' is ",
             dtype_safetensors_name(i.dtype), " but the destination is ",
             dtype_safetensors_name(dst.dtype));
  read_range(name, element_offset, dst.numel, dst.data);
}

}  // namespace shardwise
