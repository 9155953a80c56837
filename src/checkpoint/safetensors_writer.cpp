// safetensors writer: builds the header from the collected entries, then streams each tensor
// from its source into an atomic file write.
#include <algorithm>
#include <array>
#include <bit>
#include <limits>
#include <nlohmann/json.hpp>
#include <utility>

#include "shardwise/checkpoint/safetensors.hpp"
#include "shardwise/core/atomic_file.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/core/message_text.hpp"

namespace shardwise {

namespace {

// Byte size of a tensor, with the reader's rules: every dimension non-negative and the product of
// the non-zero ones within int64 (so the file written can be read back).
std::uint64_t checked_nbytes(std::string_view name, DType dtype,
                             const std::vector<std::int64_t>& shape) {
  constexpr auto kMax = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  std::uint64_t nonzero_product = 1;
  bool zero = false;
  for (std::int64_t d : shape) {
    SW_REQUIRE(d >= 0, ShapeError, "safetensors tensor '", printable(name),
               "': negative dimension ", d);
    zero = zero || d == 0;
    const auto u = static_cast<std::uint64_t>(d);
    SW_REQUIRE(d == 0 || (!__builtin_mul_overflow(nonzero_product, u, &nonzero_product) &&
                          nonzero_product <= kMax),
               ShapeError, "safetensors tensor '", printable(name),
               "': shape has too many elements");
  }
  if (zero) return 0;
  // In bits, as the reader counts: sub-byte dtypes (F4, F6_*) must fill whole bytes.
  std::uint64_t nbits = 0;
  SW_REQUIRE(!__builtin_mul_overflow(nonzero_product, dtype_bits(dtype), &nbits), ShapeError,
             "safetensors tensor '", printable(name), "': too many bytes");
  SW_REQUIRE(nbits % 8 == 0, ShapeError, "safetensors tensor '", printable(name),
             "': ", nonzero_product, " ", dtype_safetensors_name(dtype), " elements of ",
             dtype_bits(dtype), " bits do not fill whole bytes");
  return nbits / 8;
}

// `text` as a JSON string literal; InvalidArgument when it is not valid UTF-8.
std::string json_string(const std::string& text) {
  // Printable ASCII, the common case, needs only '"' and '\\' escaped (as nlohmann's dump()
  // does): done here without its per-call allocations, and in one pass for a big metadata value.
  if (std::all_of(text.begin(), text.end(), [](char c) { return c >= 0x20 && c < 0x7F; })) {
    std::string out;
    out.reserve(text.size() + text.size() / 8 + 2);
    out += '"';
    for (const char c : text) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    out += '"';
    return out;
  }
  try {
    return nlohmann::json(text).dump();
  } catch (const nlohmann::json::exception& e) {
    throw InvalidArgument(str_cat("safetensors header cannot hold '", printable(text),
                                  "': not valid UTF-8 (", e.what(), ")"));
  }
}

// Counts the bytes a producer writes and forwards them to the file.
class CountingChunkSink final : public SafetensorsChunkSink {
 public:
  CountingChunkSink(FileSink& file, std::string_view tensor, std::uint64_t expected)
      : file_(file), tensor_(tensor), remaining_(expected) {}
  void write(const void* data, std::size_t size) override {
    SW_REQUIRE(size <= remaining_, InvalidArgument, "safetensors tensor '", printable(tensor_),
               "': producer wrote more than the ", remaining_, " bytes still expected");
    file_.write(data, size);
    remaining_ -= size;
  }
  std::uint64_t remaining() const override { return remaining_; }

 private:
  FileSink& file_;
  std::string_view tensor_;
  std::uint64_t remaining_;
};

}  // namespace

void SafetensorsWriter::add_entry(Entry entry) {
  SW_REQUIRE(!entry.name.empty(), InvalidArgument, "safetensors tensor name must not be empty");
  SW_REQUIRE(entry.name != kSafetensorsMetadataKey, InvalidArgument, "'", kSafetensorsMetadataKey,
             "' is reserved and cannot name a tensor");
  SW_REQUIRE(entry.name.size() <= kSafetensorsMaxNameBytes, InvalidArgument,
             "safetensors tensor name of ", entry.name.size(), " bytes exceeds the limit of ",
             kSafetensorsMaxNameBytes, " bytes: '", printable(entry.name), "'");
  // A hash set keeps adding n tensors O(n) (a scan per add made 40k tensors take 40 s).
  SW_REQUIRE(names_.insert(entry.name).second, InvalidArgument, "safetensors tensor '",
             printable(entry.name), "' added twice");
  entries_.push_back(std::move(entry));
}

void SafetensorsWriter::add(std::string name, DType dtype, std::vector<std::int64_t> shape,
                            const void* data) {
  const std::uint64_t nbytes = checked_nbytes(name, dtype, shape);
  SW_REQUIRE(data != nullptr || nbytes == 0, InvalidArgument, "safetensors tensor '",
             printable(name), "': null data for ", nbytes, " bytes");
  add_entry({std::move(name), dtype, std::move(shape), nbytes, data, nullptr});
}

void SafetensorsWriter::add(std::string name, DType dtype, std::vector<std::int64_t> shape,
                            std::span<const std::byte> bytes) {
  const std::uint64_t nbytes = checked_nbytes(name, dtype, shape);
  SW_REQUIRE(bytes.size() == nbytes, ShapeError, "safetensors tensor '", printable(name),
             "': ", bytes.size(), " bytes given but the shape of ", dtype_safetensors_name(dtype),
             " needs ", nbytes);
  add(std::move(name), dtype, std::move(shape), static_cast<const void*>(bytes.data()));
}

void SafetensorsWriter::add(std::string name, std::vector<std::int64_t> shape,
                            const TensorView& view) {
  const std::uint64_t nbytes = checked_nbytes(name, view.dtype, shape);
  SW_REQUIRE(nbytes == view.nbytes(), ShapeError, "safetensors tensor '", printable(name),
             "': shape of ", nbytes / dtype_size(view.dtype), " elements given for a view of ",
             view.numel);
  add(std::move(name), view.dtype, std::move(shape), static_cast<const void*>(view.data));
}

void SafetensorsWriter::add_streamed(std::string name, DType dtype, std::vector<std::int64_t> shape,
                                     Producer producer) {
  const std::uint64_t nbytes = checked_nbytes(name, dtype, shape);
  SW_REQUIRE(producer != nullptr, InvalidArgument, "safetensors tensor '", printable(name),
             "': empty producer");
  add_entry({std::move(name), dtype, std::move(shape), nbytes, nullptr, std::move(producer)});
}

void SafetensorsWriter::set_metadata(std::string key, std::string value) {
  metadata_[std::move(key)] = std::move(value);
}

std::vector<const SafetensorsWriter::Entry*> SafetensorsWriter::layout_order() const {
  std::vector<const Entry*> order;
  order.reserve(entries_.size());
  for (const Entry& e : entries_) order.push_back(&e);
  // Larger elements first: with the data area 8-byte aligned, every tensor starts at a multiple
  // of its element size.
  std::stable_sort(order.begin(), order.end(), [](const Entry* a, const Entry* b) {
    return dtype_bits(a->dtype) > dtype_bits(b->dtype);
  });
  return order;
}

std::string SafetensorsWriter::header() const {
  // Written entry by entry: an ordered_json object looks every key up linearly (quadratic in the
  // tensor count), and names are already known to be unique.
  std::string text = "{";
  if (!metadata_.empty()) {
    text += str_cat(json_string(std::string(kSafetensorsMetadataKey)), ":{");
    bool first = true;
    for (const auto& [key, value] : metadata_) {
      text += str_cat(first ? "" : ",", json_string(key), ":", json_string(value));
      first = false;
    }
    text += "}";
  }
  std::uint64_t offset = 0;
  for (const Entry* e : layout_order()) {
    if (text.size() > 1) text += ',';
    text += json_string(e->name);
    text += ":{\"dtype\":\"";
    text += dtype_safetensors_name(e->dtype);
    text += "\",\"shape\":[";
    for (std::size_t i = 0; i < e->shape.size(); ++i) {
      if (i > 0) text += ',';
      text += std::to_string(e->shape[i]);
    }
    text += str_cat("],\"data_offsets\":[", offset, ",", offset + e->nbytes, "]}");
    offset += e->nbytes;
  }
  text += "}";
  // Spaces (JSON whitespace) pad the header so the data area starts 8-byte aligned.
  text.append((8 - text.size() % 8) % 8, ' ');
  SW_REQUIRE(text.size() <= kSafetensorsMaxHeaderBytes, InvalidArgument, "safetensors header of ",
             text.size(), " bytes exceeds the limit of ", kSafetensorsMaxHeaderBytes);
  return text;
}

std::uint64_t SafetensorsWriter::file_bytes_with_header(std::size_t header_bytes) const {
  std::uint64_t total = 8 + header_bytes;
  for (const Entry& e : entries_) total += e.nbytes;
  return total;
}

std::uint64_t SafetensorsWriter::file_bytes() const {
  return file_bytes_with_header(header().size());
}

void SafetensorsWriter::write_atomic(const std::filesystem::path& path,
                                     RenameSync rename_sync) const {
  static_assert(std::endian::native == std::endian::little);
  const std::string text = header();
  const std::vector<const Entry*> order = layout_order();
  write_file_atomic(
      path,
      [&](FileSink& sink) {
        sink.reserve(file_bytes_with_header(text.size()));
        const std::uint64_t header_bytes = text.size();
        sink.write(&header_bytes, sizeof(header_bytes));
        sink.write(text);
        for (const Entry* e : order) {
          if (e->producer == nullptr) {
            sink.write(e->data, static_cast<std::size_t>(e->nbytes));
            continue;
          }
          CountingChunkSink chunks(sink, e->name, e->nbytes);
          e->producer(chunks);
          SW_REQUIRE(chunks.remaining() == 0, InvalidArgument, "safetensors tensor '",
                     printable(e->name), "': producer wrote ", e->nbytes - chunks.remaining(),
                     " of ", e->nbytes, " bytes");
        }
      },
      rename_sync);
}

}  // namespace shardwise
