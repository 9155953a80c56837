// safetensors files (the Hugging Face format, readable by the Python `safetensors` package and by
// numpy with a few lines of struct/json):
//
//   [8 bytes]  N, the header length, unsigned 64-bit little-endian
//   [N bytes]  UTF-8 JSON object: {"__metadata__": {str: str, ...},            (optional)
//                                  "<tensor name>": {"dtype": "F32", "shape": [2, 3],
//                                                    "data_offsets": [begin, end]}, ...}
//   [rest]     the data area; data_offsets are byte offsets into it, [begin, end)
//
// Tensors are row-major and little-endian. The tensors' byte ranges tile the data area exactly:
// no gaps, no overlaps, nothing after the last one.
//
// What this writer produces: the header is padded with spaces so that N is a multiple of 8 (the
// data area then starts 8-byte aligned); `__metadata__` comes first when present; tensors are
// laid out in order of decreasing element size and, among equal sizes, in the order they were
// added (so every tensor is naturally aligned in the file and in a memory map of it); the header
// lists them in that same layout order.
//
// What this reader accepts: any file that follows the format (header length up to 100 MB, tensors
// in any order in the header). The header must be strict JSON that starts with '{' and is padded
// only with trailing spaces: a byte-order mark, a NUL byte or other padding is rejected, as are
// JSON nested deeper than the format's 3 levels, tensor names over 64 KiB and shapes whose
// non-zero dimensions multiply past int64. Everything is checked before use and the first
// violation is reported as a FormatError naming the file and, where there is one, the tensor
// (escaped and shortened: see core/message_text.hpp). Tensor entries with keys other than
// dtype/shape/data_offsets, and duplicate keys at any level of the header, are rejected. Time is
// linear in the header size (plus a sort by offset).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "shardwise/core/atomic_file.hpp"
#include "shardwise/core/dtype.hpp"
#include "shardwise/core/message_text.hpp"
#include "shardwise/core/tensor_view.hpp"

namespace shardwise {

// The header key that holds the file's string metadata instead of a tensor.
inline constexpr std::string_view kSafetensorsMetadataKey = "__metadata__";

// Largest header the reader accepts (the limit of the reference implementation).
inline constexpr std::uint64_t kSafetensorsMaxHeaderBytes = 100'000'000;
// Longest tensor name the reader accepts and the writer writes (names are quoted in messages and
// matched by patterns; nothing real comes close).
inline constexpr std::size_t kSafetensorsMaxNameBytes = 64 * 1024;

// One tensor entry of a header, with its byte range relative to the data area.
struct SafetensorsTensorInfo {
  std::string name;
  DType dtype = DType::kFloat32;
  std::vector<std::int64_t> shape;
  std::uint64_t data_begin = 0;
  std::uint64_t data_end = 0;

  std::int64_t numel() const;
  std::uint64_t nbytes() const { return data_end - data_begin; }
};

// A read-only view of one tensor inside a mapped file. Valid while the SafetensorsFile lives.
struct SafetensorsTensorView {
  const SafetensorsTensorInfo* info = nullptr;
  // First byte of the tensor. Files written by shardwise keep every tensor naturally aligned;
  // files from other writers may not, so as<T>() checks the alignment.
  const std::byte* data = nullptr;

  DType dtype() const { return info->dtype; }
  std::span<const std::int64_t> shape() const { return info->shape; }
  std::int64_t numel() const { return info->numel(); }
  std::size_t nbytes() const { return static_cast<std::size_t>(info->nbytes()); }
  // Typed pointer; throws InvariantError when sizeof(T) does not match the dtype or the data is
  // not aligned for T (use read_range to copy out of an unaligned file instead).
  template <typename T>
  const T* as() const {
    SW_CHECK(sizeof(T) == dtype_size(info->dtype), "tensor '", printable(info->name), "' of ",
             dtype_name(info->dtype), " read as ", sizeof(T), "-byte elements");
    SW_CHECK(reinterpret_cast<std::uintptr_t>(data) % alignof(T) == 0, "tensor '",
             printable(info->name), "' is not aligned to ", alignof(T), " bytes in its file");
    return reinterpret_cast<const T*>(data);
  }
};

// A validated, memory-mapped safetensors file. Opening reads and checks only the header; tensor
// bytes are paged in from the mapping when they are touched. Const methods are safe to call from
// several threads at once; moving the object keeps views and info pointers valid.
class SafetensorsFile {
 public:
  // Maps and validates `path`. Throws IoError (cannot open/map) or FormatError.
  static SafetensorsFile open(const std::filesystem::path& path);

  SafetensorsFile(SafetensorsFile&& other) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&& other) noexcept;
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;
  ~SafetensorsFile();

  const std::filesystem::path& path() const { return path_; }
  // All tensors, in the order of their bytes in the data area.
  const std::vector<SafetensorsTensorInfo>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  bool contains(std::string_view name) const;
  // Throws FormatError naming the file and the tensor when there is no such tensor.
  const SafetensorsTensorInfo& info(std::string_view name) const;
  SafetensorsTensorView tensor(std::string_view name) const;

  // Copies elements [element_offset, element_offset + count) of the (flattened) tensor to dst,
  // touching only those bytes of the file: large ranges with pread() straight into dst (no page
  // faults on the mapping), small ones from the mapping. Throws InvalidArgument when the range is
  // outside the tensor, IoError when the file shrank or cannot be read.
  void read_range(std::string_view name, std::int64_t element_offset, std::int64_t count,
                  void* dst) const;
  // Same into a view; dst's dtype must match the tensor's and dst.numel is the count.
  void read_range(std::string_view name, std::int64_t element_offset, TensorView dst) const;

  std::uint64_t header_bytes() const { return header_bytes_; }  // N
  std::uint64_t data_bytes() const { return data_bytes_; }
  std::uint64_t file_bytes() const { return 8 + header_bytes_ + data_bytes_; }

 private:
  SafetensorsFile() = default;
  void unmap() noexcept;

  std::filesystem::path path_;
  int fd_ = -1;  // kept open for read_range's preads
  void* mapping_ = nullptr;
  std::size_t mapping_bytes_ = 0;
  const std::byte* data_ = nullptr;  // start of the data area
  std::uint64_t header_bytes_ = 0;
  std::uint64_t data_bytes_ = 0;
  std::vector<SafetensorsTensorInfo> tensors_;
  std::unordered_map<std::string, std::size_t> index_;
  std::map<std::string, std::string> metadata_;
};

// Parses and validates a header (the N bytes after the length prefix) for a data area of
// `data_bytes`; `file_for_errors` is named in every error. Tensors come back sorted by offset.
// Exposed for tests and tools that read headers without mapping a file.
struct SafetensorsHeader {
  std::vector<SafetensorsTensorInfo> tensors;
  std::map<std::string, std::string> metadata;
};
SafetensorsHeader parse_safetensors_header(std::string_view header_json, std::uint64_t data_bytes,
                                           const std::string& file_for_errors);

// Receives the bytes of one streamed tensor; the writer checks that exactly the declared number
// of bytes arrives.
class SafetensorsChunkSink {
 public:
  virtual ~SafetensorsChunkSink() = default;
  virtual void write(const void* data, std::size_t size) = 0;
  // Bytes still expected for the current tensor.
  virtual std::uint64_t remaining() const = 0;
};

// Collects tensors and metadata, then writes one file atomically (temp file + fsync + rename)
// streaming each tensor from its source: no concatenated copy of the data is ever made.
class SafetensorsWriter {
 public:
  // Called once, at write time, to produce the tensor's bytes in order, in chunks of any size.
  using Producer = std::function<void(SafetensorsChunkSink&)>;

  // Adds a tensor whose numel(shape) * dtype_size bytes live at `data` (caller memory that must
  // stay valid and unchanged until write_atomic returns).
  void add(std::string name, DType dtype, std::vector<std::int64_t> shape, const void* data);
  // Same, with the byte count checked against the shape.
  void add(std::string name, DType dtype, std::vector<std::int64_t> shape,
           std::span<const std::byte> bytes);
  // Same, from a view (shape given separately; its product must equal view.numel).
  void add(std::string name, std::vector<std::int64_t> shape, const TensorView& view);
  // Adds a tensor whose bytes `producer` streams at write time.
  void add_streamed(std::string name, DType dtype, std::vector<std::int64_t> shape,
                    Producer producer);
  // Adds or replaces one `__metadata__` entry.
  void set_metadata(std::string key, std::string value);

  std::size_t size() const { return entries_.size(); }
  // The padded header JSON (without the 8-byte length) that write_atomic will write.
  std::string header() const;
  // Total file size write_atomic will produce.
  std::uint64_t file_bytes() const;
  // Writes the file atomically (see core/atomic_file.hpp). Throws IoError on filesystem errors,
  // InvalidArgument when a producer writes the wrong number of bytes; exceptions from producers
  // propagate. In every failure case `path` keeps its previous content. `rename_sync` as for
  // write_file_atomic (kByCommit for a file of a staging directory).
  void write_atomic(const std::filesystem::path& path,
                    RenameSync rename_sync = RenameSync::kNow) const;

 private:
  struct Entry {
    std::string name;
    DType dtype;
    std::vector<std::int64_t> shape;
    std::uint64_t nbytes;
    const void* data;  // null for streamed entries
    Producer producer;
  };
  void add_entry(Entry entry);
  // Entries in file order (decreasing element size, then insertion order).
  std::vector<const Entry*> layout_order() const;
  // File size for a header of `header_bytes`: the 8-byte length, the header, every tensor.
  std::uint64_t file_bytes_with_header(std::size_t header_bytes) const;

  std::vector<Entry> entries_;
  std::unordered_set<std::string> names_;  // of entries_, for O(1) duplicate checks
  std::map<std::string, std::string> metadata_;
};

}  // namespace shardwise
