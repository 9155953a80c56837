// The checkpoint manifest (checkpoint.json) as text: parsing with bounded nesting and the checks
// of the fields a resume trusts (private to the checkpoint library; split from checkpoint.cpp so
// the fuzz harness tests/fuzz/fuzz_checkpoint_manifest.cpp can build it alone).
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "shardwise/core/error.hpp"
#include "shardwise/core/json_text.hpp"
#include "shardwise/core/message_text.hpp"

namespace shardwise::checkpoint_detail {

// 100 for "step-0000100"; nothing for any other name (or more digits than int64 holds).
std::optional<std::int64_t> parse_step_directory_name(const std::string& name);

// Parses and validates the text of `file`, the manifest of the step directory `directory`:
// nesting bounded (core/json_text.hpp), the required fields present and typed, the step, sample
// count and data-parallel size in range and agreeing with the directory name and rank files.
// Throws FormatError naming the file and field.
nlohmann::json parse_checkpoint_manifest(std::string_view text,
                                         const std::filesystem::path& directory,
                                         const std::filesystem::path& file);

// A JSON integer in [low, high], read strictly (2^63 does not wrap to a negative, 5.5 is no
// step); FormatError naming `file` and `field` otherwise.
std::int64_t manifest_integer(const nlohmann::json& value, const std::string& field,
                              std::int64_t low, std::int64_t high,
                              const std::filesystem::path& file);

// Field `key` of the manifest `m` (read from `file`) as a T; FormatError when absent or mistyped.
template <typename T>
T manifest_get(const nlohmann::json& m, const char* key, const std::filesystem::path& file) {
  SW_REQUIRE(m.contains(key), FormatError, "checkpoint manifest ", quoted(file), " has no \"", key,
             "\"");
  try {
    return m.at(key).get<T>();
  } catch (const nlohmann::json::exception& e) {
    throw FormatError(str_cat("checkpoint manifest ", quoted(file), ": \"", key,
                              "\" is malformed: ", json_error_text(e)));
  }
}

}  // namespace shardwise::checkpoint_detail
