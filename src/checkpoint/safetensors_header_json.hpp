// The JSON layer of safetensors header parsing (private to the checkpoint library): turns the
// header bytes into its top-level entries, enforcing the framing rules and the header's flat
// shape before any value is interpreted.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace shardwise::safetensors_detail {

// A header is an object of objects whose values are strings or arrays of numbers: 3 levels.
inline constexpr int kMaxHeaderDepth = 3;

// The header's top-level entries, in file order: tensor name (or "__metadata__") -> value.
using HeaderEntries = std::vector<std::pair<std::string, nlohmann::json>>;

// Parses `header` as strict JSON: it must start with '{', hold no NUL byte and no byte-order
// mark, end with the closing '}' followed only by spaces, nest at most kMaxHeaderDepth levels,
// repeat no key in any object, and have top-level keys of at most kSafetensorsMaxNameBytes.
// Throws FormatError with `where` (e.g. "safetensors file 'x': ") in front of the message.
// Runs in time linear in the header (no recursion, no quadratic key lookups).
HeaderEntries parse_header_entries(std::string_view header, const std::string& where);

// A JSON value shortened and escaped for an error message.
std::string quoted_json(const nlohmann::json& value);

}  // namespace shardwise::safetensors_detail
