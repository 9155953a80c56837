// Reading JSON the program did not write itself (checkpoint manifests, model specs, metadata in
// safetensors files): nesting is bounded before any DOM is built, because nlohmann's dump(),
// comparison and error paths recurse once per level and a few hundred kilobytes of '[' overflow
// the stack; and what a message quotes of the input is cut to a few dozen bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace shardwise {

// Deeper than any document the project reads (a manifest nests 4 levels, a model spec 3).
inline constexpr int kMaxJsonDepth = 64;

// Parses `text` as one JSON value. Throws FormatError starting with `where` (e.g. "checkpoint
// manifest 'x'") when it nests arrays/objects more than `max_depth` levels (checked in one linear
// pass before parsing), holds a NUL byte or a key twice in one object, or is not valid JSON; the
// parser's message is cut to a bounded length.
nlohmann::json parse_json_text(std::string_view text, std::string_view where,
                               int max_depth = kMaxJsonDepth);

// The deepest nesting of arrays and objects in `text`, counting brackets outside strings; stops
// early and returns a value > `limit` as soon as the nesting passes `limit`. Exact for valid
// JSON (and never below the parser's view of an invalid one, which the parser then refuses).
int json_nesting_depth(std::string_view text, int limit);

// `value` when it is a JSON integer in [low, high], read strictly: 2^63 does not wrap to a
// negative and 5.5 is no integer (get<std::int64_t>() would truncate it). Nothing otherwise.
std::optional<std::int64_t> json_integer_within(const nlohmann::json& value, std::int64_t low,
                                                std::int64_t high);

// What nlohmann's exception says, for a message of ours: its "[json.exception.type_error.302] "
// prefix dropped (it names the library's internals, not the input) and the rest cut to 200 bytes.
std::string json_error_text(const nlohmann::json::exception& e);

// A JSON value for an error message: compact, escaped and cut to at most `max_bytes` of its text.
std::string json_excerpt(const nlohmann::json& value, std::size_t max_bytes = 64);

}  // namespace shardwise
