// Validation of a safetensors header: every number is checked before anything uses it. The JSON
// itself is read by safetensors_header_json.cpp (strict framing, bounded depth, linear time).
#include <algorithm>
#include <limits>
#include <span>

#include "safetensors_header_json.hpp"
#include "shardwise/checkpoint/safetensors.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/core/message_text.hpp"

namespace shardwise {

namespace {

using Json = nlohmann::json;
using safetensors_detail::quoted_json;

std::string json_type(const Json& value) { return value.type_name(); }

// Throws the FormatError for the first problem, naming the file (and the tensor, if any). Names
// and values from the file are escaped and shortened (see core/message_text.hpp).
class HeaderErrors {
 public:
  explicit HeaderErrors(const std::string& file)
      : prefix_(str_cat("safetensors file '", printable(file, 4096), "': ")) {}
  const std::string& prefix() const { return prefix_; }
  template <typename... Args>
  [[noreturn]] void fail(Args&&... args) const {
    throw FormatError(str_cat(prefix_, std::forward<Args>(args)...));
  }
  template <typename... Args>
  [[noreturn]] void fail_tensor(std::string_view tensor, Args&&... args) const {
    fail("tensor '", printable(tensor), "': ", std::forward<Args>(args)...);
  }

 private:
  std::string prefix_;
};

std::uint64_t read_unsigned(const Json& value, const HeaderErrors& errors, std::string_view tensor,
                            std::string_view field) {
  if (!value.is_number_unsigned()) {
    errors.fail_tensor(tensor, field, " must hold non-negative integers, found ",
                       quoted_json(value));
  }
  return value.get<std::uint64_t>();
}

DType parse_dtype(const std::string& name, const Json& dtype, const HeaderErrors& errors) {
  if (!dtype.is_string()) {
    errors.fail_tensor(name, "dtype must be a string, found ", quoted_json(dtype));
  }
  const std::string& text = dtype.get_ref<const std::string&>();
  const auto parsed = parse_safetensors_dtype(text);
  if (!parsed) {
    std::string known;
    for (const auto& list :
         {std::span<const DType>(kAllDTypes), std::span<const DType>(kStorageOnlyDTypes)}) {
      for (DType d : list) known += str_cat(known.empty() ? "" : ", ", dtype_safetensors_name(d));
    }
    errors.fail_tensor(name, "unknown dtype '", printable(text), "' (known: ", known, ")");
  }
  return *parsed;
}

// Reads the shape into `info` and returns the byte length it implies. Every dimension fits
// int64 and so does the product of the non-zero ones, so no product over any subset of the
// dimensions (as slicing and MXFP8 code form them) can overflow, even when a zero dimension
// makes the tensor empty.
std::uint64_t parse_shape(const Json& shape, SafetensorsTensorInfo& info,
                          const HeaderErrors& errors) {
  const std::string& name = info.name;
  if (!shape.is_array()) {
    errors.fail_tensor(name, "shape must be an array, found ", quoted_json(shape));
  }
  constexpr auto kMax = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  bool has_zero_dim = false;
  std::uint64_t nonzero_product = 1;
  for (const Json& dim : shape) {
    const std::uint64_t d = read_unsigned(dim, errors, name, "shape");
    if (d > kMax) errors.fail_tensor(name, "shape dimension ", d, " is too large");
    has_zero_dim = has_zero_dim || d == 0;
    if (d != 0 &&
        (__builtin_mul_overflow(nonzero_product, d, &nonzero_product) || nonzero_product > kMax)) {
      errors.fail_tensor(name, "shape ", quoted_json(shape),
                         " has too many elements (its non-zero dimensions multiply past int64)");
    }
    info.shape.push_back(static_cast<std::int64_t>(d));
  }
  if (has_zero_dim) return 0;
  // In bits: the sub-byte dtypes (F4, F6_*) pack elements across bytes, and their elements must
  // fill whole bytes, as the format requires.
  std::uint64_t bits = 0;
  if (__builtin_mul_overflow(nonzero_product, dtype_bits(info.dtype), &bits)) {
    errors.fail_tensor(name, "shape ", quoted_json(shape), " is too large in bytes");
  }
  if (bits % 8 != 0) {
    errors.fail_tensor(name, "shape ", quoted_json(shape), " holds ", nonzero_product, " ",
                       dtype_safetensors_name(info.dtype), " elements of ", dtype_bits(info.dtype),
                       " bits, which do not fill whole bytes");
  }
  return bits / 8;
}

void parse_offsets(const Json& offsets, std::uint64_t data_bytes, SafetensorsTensorInfo& info,
                   const HeaderErrors& errors) {
  const std::string& name = info.name;
  if (!offsets.is_array() || offsets.size() != 2) {
    errors.fail_tensor(name, "data_offsets must be an array [begin, end], found ",
                       quoted_json(offsets));
  }
  info.data_begin = read_unsigned(offsets[0], errors, name, "data_offsets");
  info.data_end = read_unsigned(offsets[1], errors, name, "data_offsets");
  if (info.data_begin > info.data_end) {
    errors.fail_tensor(name, "data_offsets ", quoted_json(offsets), " end before they begin");
  }
  if (info.data_end > data_bytes) {
    errors.fail_tensor(name, "data_offsets ", quoted_json(offsets), " reach past the data area of ",
                       data_bytes, " bytes (file truncated?)");
  }
}

SafetensorsTensorInfo parse_tensor(const std::string& name, const Json& entry,
                                   std::uint64_t data_bytes, const HeaderErrors& errors) {
  if (!entry.is_object()) {
    errors.fail_tensor(name, "entry must be a JSON object, found ", json_type(entry));
  }
  for (const auto& [key, value] : entry.items()) {
    if (key != "dtype" && key != "shape" && key != "data_offsets") {
      errors.fail_tensor(name, "unexpected field '", printable(key),
                         "' (a tensor entry holds dtype, shape and data_offsets)");
    }
  }
  for (const char* field : {"dtype", "shape", "data_offsets"}) {
    if (!entry.contains(field)) errors.fail_tensor(name, "missing field '", field, "'");
  }
  SafetensorsTensorInfo info;
  info.name = name;
  info.dtype = parse_dtype(name, entry["dtype"], errors);
  const std::uint64_t expected_bytes = parse_shape(entry["shape"], info, errors);
  parse_offsets(entry["data_offsets"], data_bytes, info, errors);
  if (info.nbytes() != expected_bytes) {
    errors.fail_tensor(name, "data_offsets ", quoted_json(entry["data_offsets"]), " span ",
                       info.nbytes(), " bytes but shape ", quoted_json(entry["shape"]), " of ",
                       dtype_safetensors_name(info.dtype), " needs ", expected_bytes);
  }
  return info;
}

}  // namespace

std::int64_t SafetensorsTensorInfo::numel() const {
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  return n;
}

SafetensorsHeader parse_safetensors_header(std::string_view header_json, std::uint64_t data_bytes,
                                           const std::string& file_for_errors) {
  const HeaderErrors errors(file_for_errors);
  safetensors_detail::HeaderEntries entries =
      safetensors_detail::parse_header_entries(header_json, errors.prefix());

  SafetensorsHeader header;
  header.tensors.reserve(entries.size());
  for (auto& [key, value] : entries) {
    if (key == kSafetensorsMetadataKey) {
      if (!value.is_object()) {
        errors.fail("__metadata__ must be an object of strings, found ", json_type(value));
      }
      for (auto& [meta_key, meta_value] : value.items()) {
        if (!meta_value.is_string()) {
          errors.fail("__metadata__ value of '", printable(meta_key), "' must be a string, found ",
                      quoted_json(meta_value));
        }
        header.metadata.emplace(meta_key, std::move(meta_value.get_ref<std::string&>()));
      }
      continue;
    }
    header.tensors.push_back(parse_tensor(key, value, data_bytes, errors));
    value = Json();  // release the entry's JSON as we go (1M entries add up)
  }

  // The byte ranges must tile the data area: sorted by (begin, end), each begins where the
  // previous ended, the first at 0 and the last at the end of the file.
  std::stable_sort(header.tensors.begin(), header.tensors.end(),
                   [](const SafetensorsTensorInfo& a, const SafetensorsTensorInfo& b) {
                     return a.data_begin != b.data_begin ? a.data_begin < b.data_begin
                                                         : a.data_end < b.data_end;
                   });
  std::uint64_t position = 0;
  const SafetensorsTensorInfo* previous = nullptr;
  for (const SafetensorsTensorInfo& t : header.tensors) {
    if (t.data_begin < position) {
      errors.fail_tensor(t.name, "bytes [", t.data_begin, ", ", t.data_end, ") overlap tensor '",
                         printable(previous->name), "' [", previous->data_begin, ", ",
                         previous->data_end, ")");
    }
    if (t.data_begin > position) {
      if (previous == nullptr) {
        errors.fail_tensor(t.name, "gap of ", t.data_begin,
                           " unused bytes at the start of the data area");
      }
      errors.fail_tensor(t.name, "gap of ", t.data_begin - position,
                         " unused bytes between tensor '", printable(previous->name), "' (ends at ",
                         position, ") and this tensor (begins at ", t.data_begin, ")");
    }
    position = t.data_end;
    previous = &t;
  }
  if (position != data_bytes) {
    errors.fail(data_bytes - position, " trailing bytes after the last tensor (data area is ",
                data_bytes, " bytes, tensors end at ", position, ")");
  }
  return header;
}

}  // namespace shardwise
