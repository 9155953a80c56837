#include "shardwise/core/json_text.hpp"

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
  const int depth = json_nesting_depth(text, max_depth);
  SW_REQUIRE(depth <= max_depth, FormatError, where, ": JSON nests deeper than ", max_depth,
             " levels; no file of this kind does");
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {  // parse errors, numbers too large for a double
    throw FormatError(str_cat(where, ": malformed JSON: ", printable(e.what(), 200)));
  }
}

std::string json_excerpt(const nlohmann::json& value, std::size_t max_bytes) {
  // dump() of a value from parse_json_text is bounded in depth; its length is cut here.
  return printable(value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), max_bytes);
}

}  // namespace shardwise
