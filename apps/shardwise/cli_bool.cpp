#include "cli_bool.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <string_view>

#include "shardwise/core/error.hpp"
#include "shardwise/core/message_text.hpp"

namespace shardwise::cli {

bool parse_bool_option(const std::string& value, const char* option) {
  // The spellings CLI11's own flags take, in any case.
  static constexpr std::array<std::string_view, 4> kTrue{"true", "yes", "on", "1"};
  static constexpr std::array<std::string_view, 4> kFalse{"false", "no", "off", "0"};
  std::string lower = value;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (std::find(kTrue.begin(), kTrue.end(), lower) != kTrue.end()) return true;
  if (std::find(kFalse.begin(), kFalse.end(), lower) != kFalse.end()) return false;
  throw InvalidArgument(str_cat(option, ": expected true or false (or yes/no, on/off, 1/0), got '",
                                printable(value), "'"));
}

}  // namespace shardwise::cli
