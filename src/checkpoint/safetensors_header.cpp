// Validation of a safetensors header: every number is checked before anything uses it.
#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "shardwise/checkpoint/safetensors.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise {

namespace {

using Json = nlohmann::ordered_json;

constexpr std::string_view kMetadataKey = "__metadata__";

std::string json_type(const Json& value) { return value.type_name(); }

// Throws the FormatError for the first problem, naming the file (and the tensor, if any).
class HeaderErrors {
 public:
  explicit HeaderErrors(const std::string& file) : file_(file) {}
  template <typename... Args>
  [[noreturn]] void fail(Args&&... args) const {
    throw FormatError(str_cat("safetensors file '", file_, "': ", std::forward<Args>(args)...));
  }
  template <typename... Args>
  [[noreturn]] void fail_tensor(std::string_view tensor, Args&&... args) const {
    fail("tensor '", tensor, "': ", std::forward<Args>(args)...);
  }

 private:
  const std::string& file_;
};

std::uint64_t read_unsigned(const Json& value, const HeaderErrors& errors, std::string_view tensor,
                            std::string_view field) {
  if (!value.is_number_unsigned()) {
    errors.fail_tensor(tensor, field, " must hold non-negative integers, found ", value.dump());
  }
  return value.get<std::uint64_t>();
}

SafetensorsTensorInfo parse_tensor(const std::string& name, const Json& entry,
                                   std::uint64_t data_bytes, const HeaderErrors& errors) {
  if (!entry.is_object()) {
    errors.fail_tensor(name, "entry must be a JSON object, found ", json_type(entry));
  }
  for (const auto& [key, value] : entry.items()) {
    if (key != "dtype" && key != "shape" && key != "data_offsets") {
      errors.fail_tensor(name, "unexpected field '", key,
                         "' (a tensor entry holds dtype, shape and data_offsets)");
    }
  }
  for (const char* field : {"dtype", "shape", "data_offsets"}) {
    if (!entry.contains(field)) errors.fail_tensor(name, "missing field '", field, "'");
  }
  SafetensorsTensorInfo info;
  info.name = name;

  const Json& dtype = entry["dtype"];
  if (!dtype.is_string()) errors.fail_tensor(name, "dtype must be a string, found ", dtype.dump());
  const auto parsed_dtype = parse_safetensors_dtype(dtype.get_ref<const std::string&>());
  if (!parsed_dtype) {
    std::string known;
    for (DType d : kAllDTypes)
      known += str_cat(known.empty() ? "" : ", ", dtype_safetensors_name(d));
    errors.fail_tensor(name, "unknown dtype '", dtype.get_ref<const std::string&>(),
                       "' (known: ", known, ")");
  }
  info.dtype = *parsed_dtype;

  const Json& shape = entry["shape"];
  if (!shape.is_array()) errors.fail_tensor(name, "shape must be an array, found ", shape.dump());
  bool has_zero_dim = false;
  for (const Json& dim : shape) {
    const std::uint64_t d = read_unsigned(dim, errors, name, "shape");
    if (d > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      errors.fail_tensor(name, "shape dimension ", d, " is too large");
    }
    has_zero_dim = has_zero_dim || d == 0;
    info.shape.push_back(static_cast<std::int64_t>(d));
  }
  // Byte length implied by the shape, with overflow checks (a zero dimension makes it 0 however
  // large the others are).
  std::uint64_t expected_bytes = 0;
  if (!has_zero_dim) {
    std::uint64_t numel = 1;
    for (std::int64_t d : info.shape) {
      if (__builtin_mul_overflow(numel, static_cast<std::uint64_t>(d), &numel) ||
          numel > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
        errors.fail_tensor(name, "shape ", shape.dump(), " has too many elements");
      }
    }
    if (__builtin_mul_overflow(numel, dtype_size(info.dtype), &expected_bytes)) {
      errors.fail_tensor(name, "shape ", shape.dump(), " is too large in bytes");
    }
  }

  const Json& offsets = entry["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2) {
    errors.fail_tensor(name, "data_offsets must be an array [begin, end], found ", offsets.dump());
  }
  info.data_begin = read_unsigned(offsets[0], errors, name, "data_offsets");
  info.data_end = read_unsigned(offsets[1], errors, name, "data_offsets");
  if (info.data_begin > info.data_end) {
    errors.fail_tensor(name, "data_offsets ", offsets.dump(), " end before they begin");
  }
  if (info.data_end > data_bytes) {
    errors.fail_tensor(name, "data_offsets ", offsets.dump(), " reach past the data area of ",
                       data_bytes, " bytes (file truncated?)");
  }
  if (info.nbytes() != expected_bytes) {
    errors.fail_tensor(name, "data_offsets ", offsets.dump(), " span ", info.nbytes(),
                       " bytes but shape ", shape.dump(), " of ",
                       dtype_safetensors_name(info.dtype), " needs ", expected_bytes);
  }
  return info;
}

// nlohmann keeps the last of duplicate keys silently; this callback records the first duplicate
// (at any nesting level) so the header can be rejected.
struct DuplicateKeyFinder {
  std::vector<std::set<std::string>> open_objects;
  std::string duplicate;

  bool operator()(int /*depth*/, nlohmann::detail::parse_event_t event, Json& parsed) {
    using Event = nlohmann::detail::parse_event_t;
    if (event == Event::object_start) {
      open_objects.emplace_back();
    } else if (event == Event::object_end) {
      if (!open_objects.empty()) open_objects.pop_back();
    } else if (event == Event::key && !open_objects.empty()) {
      const auto& key = parsed.get_ref<const std::string&>();
      if (!open_objects.back().insert(key).second && duplicate.empty()) duplicate = key;
    }
    return true;
  }
};

}  // namespace

std::int64_t SafetensorsTensorInfo::numel() const {
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  return n;
}

SafetensorsHeader parse_safetensors_header(std::string_view header_json, std::uint64_t data_bytes,
                                           const std::string& file_for_errors) {
  const HeaderErrors errors(file_for_errors);
  DuplicateKeyFinder duplicates;
  Json root;
  try {
    root = Json::parse(header_json.begin(), header_json.end(), std::ref(duplicates));
  } catch (const nlohmann::json::exception& e) {
    errors.fail("header is not valid JSON: ", e.what());
  }
  if (!root.is_object()) errors.fail("header must be a JSON object, found ", json_type(root));
  if (!duplicates.duplicate.empty()) {
    errors.fail("header has the key '", duplicates.duplicate, "' more than once");
  }

  SafetensorsHeader header;
  for (const auto& [key, value] : root.items()) {
    if (key == kMetadataKey) {
      if (!value.is_object()) {
        errors.fail("__metadata__ must be an object of strings, found ", json_type(value));
      }
      for (const auto& [meta_key, meta_value] : value.items()) {
        if (!meta_value.is_string()) {
          errors.fail("__metadata__ value of '", meta_key, "' must be a string, found ",
                      meta_value.dump());
        }
        header.metadata.emplace(meta_key, meta_value.get<std::string>());
      }
      continue;
    }
    header.tensors.push_back(parse_tensor(key, value, data_bytes, errors));
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
                         previous->name, "' [", previous->data_begin, ", ", previous->data_end,
                         ")");
    }
    if (t.data_begin > position) {
      if (previous == nullptr) {
        errors.fail_tensor(t.name, "gap of ", t.data_begin,
                           " unused bytes at the start of the data area");
      }
      errors.fail_tensor(t.name, "gap of ", t.data_begin - position,
                         " unused bytes between tensor '", previous->name, "' (ends at ", position,
                         ") and this tensor (begins at ", t.data_begin, ")");
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
