#include "shardwise/core/json_text.hpp"

#include <set>
#include <string>
#include <vector>

#include "shardwise/core/error.hpp"
#include "shardwise/core/message_text.hpp"

namespace shardwise {

int json_nesting_depth(std::string_view text, int limit) {
  int depth = 0, deepest = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character cannot end the string
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > deepest && (deepest = depth) > limit) return deepest;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

nlohmann::json parse_json_text(std::string_view text, std::string_view where, int max_depth) {
  // The parser stops at a NUL byte as at the end of the text: what follows would go unread.
  // Checked first, so that a binary file (a .safetensors given for a spec) is called one.
  const std::size_t nul = text.find('\0');
  SW_REQUIRE(nul == std::string_view::npos, FormatError, where, ": a NUL byte at offset ", nul,
             "; JSON text has none (a binary file?)");
  const int depth = json_nesting_depth(text, max_depth);
  SW_REQUIRE(depth <= max_depth, FormatError, where, ": JSON nests deeper than ", max_depth,
             " levels; no file of this kind does");
  // A repeated key would silently keep its last value (the safetensors header refuses them too).
  std::vector<std::set<std::string>> keys_of_open_objects;
  const auto refuse_repeated_keys = [&](int, nlohmann::json::parse_event_t event,
                                        nlohmann::json& parsed) {
    using Event = nlohmann::json::parse_event_t;
    if (event == Event::object_start) {
      keys_of_open_objects.emplace_back();
    } else if (event == Event::object_end) {
      keys_of_open_objects.pop_back();
    } else if (event == Event::key) {
      const auto& key = parsed.get_ref<const std::string&>();
      SW_REQUIRE(keys_of_open_objects.back().insert(key).second, FormatError, where, ": the key \"",
                 printable(key, 200), "\" appears twice in one object");
    }
    return true;
  };
  try {
    return nlohmann::json::parse(text, refuse_repeated_keys);
  } catch (const nlohmann::json::exception& e) {  // parse errors, numbers too large for a double
    throw FormatError(str_cat(where, ": malformed JSON: ", json_error_text(e)));
  }
}

std::string json_error_text(const nlohmann::json::exception& e) {
  std::string_view text = e.what();
  if (text.starts_with("[json.exception.")) {
    const std::size_t close = text.find("] ");
    if (close != std::string_view::npos) text.remove_prefix(close + 2);
  }
  return printable(text, 200);
}

std::optional<std::int64_t> json_integer_within(const nlohmann::json& value, std::int64_t low,
                                                std::int64_t high) {
  if (!value.is_number_integer()) return std::nullopt;
  if (value.is_number_unsigned()) {  // above int64's range, or a non-negative that fits
    const std::uint64_t u = value.get<std::uint64_t>();
    if (high < 0 || u > static_cast<std::uint64_t>(high)) return std::nullopt;
    if (low > 0 && u < static_cast<std::uint64_t>(low)) return std::nullopt;
    return static_cast<std::int64_t>(u);
  }
  const std::int64_t v = value.get<std::int64_t>();
  if (v < low || v > high) return std::nullopt;
  return v;
}

std::string json_excerpt(const nlohmann::json& value, std::size_t max_bytes) {
  // dump() of a value from parse_json_text is bounded in depth; its length is cut here.
  return printable(value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), max_bytes);
}

}  // namespace shardwise
