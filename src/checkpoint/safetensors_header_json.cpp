// Strict, bounded JSON reading of a safetensors header. A SAX handler builds the values itself
// so that nesting is refused at the first level too deep (a DOM of 65k nested arrays crashed the
// error path that printed it) and top-level entries go into a plain vector (nlohmann's ordered
// object looks keys up linearly, which made a 1M-tensor header quadratic).
#include "safetensors_header_json.hpp"

#include <cstring>
#include <unordered_set>

#include "shardwise/checkpoint/safetensors.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/core/json_text.hpp"
#include "shardwise/core/message_text.hpp"

namespace shardwise::safetensors_detail {
namespace {

using Json = nlohmann::json;

class BoundedHeaderBuilder final : public nlohmann::json_sax<Json> {
 public:
  BoundedHeaderBuilder(HeaderEntries& entries, const std::string& where)
      : entries_(entries), where_(where) {}

  bool null() override { return add(Json(nullptr)); }
  bool boolean(bool value) override { return add(Json(value)); }
  bool number_integer(number_integer_t value) override { return add(Json(value)); }
  bool number_unsigned(number_unsigned_t value) override { return add(Json(value)); }
  bool number_float(number_float_t value, const string_t&) override { return add(Json(value)); }
  bool string(string_t& value) override { return add(Json(std::move(value))); }
  bool binary(binary_t&) override { fail("binary values are not JSON"); }
  bool start_object(std::size_t) override { return open(Json::object()); }
  bool start_array(std::size_t) override { return open(Json::array()); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }

  bool key(string_t& name) override {
    if (open_.empty()) {  // a top-level key: a tensor name or __metadata__
      if (name.size() > kSafetensorsMaxNameBytes) {
        fail("tensor name of ", name.size(), " bytes exceeds the limit of ",
             kSafetensorsMaxNameBytes, " bytes: '", printable(name), "'");
      }
    } else if (open_.back()->contains(name)) {
      fail("header has the key '", printable(name), "' more than once");
    }
    key_ = std::move(name);
    return true;
  }

  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception& e) override {
    fail("header is not valid JSON (at byte ", position, "): ", json_error_text(e));
  }

 private:
  template <typename... Args>
  [[noreturn]] void fail(Args&&... args) const {
    throw FormatError(str_cat(where_, std::forward<Args>(args)...));
  }

  // Stores a value under the pending key (or appends it to the open array); returns where it is.
  Json* place(Json value) {
    if (depth_ == 0) fail("header must be a JSON object, found ", value.type_name());
    if (open_.empty()) {
      entries_.emplace_back(std::move(key_), std::move(value));
      return &entries_.back().second;
    }
    Json& parent = *open_.back();
    if (parent.is_array()) {
      parent.push_back(std::move(value));
      return &parent.back();
    }
    return &(parent[key_] = std::move(value));
  }
  bool add(Json value) {
    place(std::move(value));
    return true;
  }
  bool open(Json container) {
    if (depth_ == kMaxHeaderDepth) {
      fail("header nests JSON deeper than ", kMaxHeaderDepth,
           " levels (it must be an object of flat tensor entries)");
    }
    if (depth_ > 0) open_.push_back(place(std::move(container)));
    ++depth_;
    return true;
  }
  bool close() {
    --depth_;
    if (!open_.empty()) open_.pop_back();
    return true;
  }

  HeaderEntries& entries_;
  const std::string& where_;
  int depth_ = 0;            // containers open, the root object included
  std::vector<Json*> open_;  // the open containers below the root
  std::string key_;
};

// The framing the format allows: '{' first, no NUL or BOM, only spaces after the final '}'.
std::string_view checked_framing(std::string_view header, const std::string& where) {
  const auto fail = [&](auto&&... args) {
    throw FormatError(str_cat(where, std::forward<decltype(args)>(args)...));
  };
  if (header.empty()) fail("header is empty (expected a JSON object)");
  if (header.starts_with("\xEF\xBB\xBF")) {
    fail("header starts with a UTF-8 byte-order mark (it must start with '{')");
  }
  if (const void* nul = std::memchr(header.data(), '\0', header.size())) {
    fail("header holds a NUL byte at offset ", static_cast<const char*>(nul) - header.data(),
         " (it must be JSON padded only with trailing spaces)");
  }
  if (header.front() != '{') {
    fail("header must be a JSON object starting with '{', found '", printable(header.substr(0, 1)),
         "' (no leading whitespace or byte-order mark)");
  }
  const std::size_t last = header.find_last_not_of(' ');
  return header.substr(0, last + 1);
}

}  // namespace

HeaderEntries parse_header_entries(std::string_view header, const std::string& where) {
  const std::string_view json = checked_framing(header, where);
  HeaderEntries entries;
  BoundedHeaderBuilder builder(entries, where);
  Json::sax_parse(json.begin(), json.end(), &builder);
  if (json.back() != '}') {
    throw FormatError(str_cat(where, "header is padded with '",
                              printable(json.substr(json.size() - 1)),
                              "' after its JSON object (only trailing spaces are allowed)"));
  }
  // Duplicate top-level keys, by hashing views of the names (entries no longer move).
  std::unordered_set<std::string_view> names;
  names.reserve(entries.size());
  for (const auto& entry : entries) {
    if (!names.insert(entry.first).second) {
      throw FormatError(
          str_cat(where, "header has the key '", printable(entry.first), "' more than once"));
    }
  }
  return entries;
}

std::string quoted_json(const nlohmann::json& value) {
  return printable(value.dump(), kMessageQuoteLimit);
}

}  // namespace shardwise::safetensors_detail
