#include "cli_integer.hpp"

#include <charconv>
#include <string>

#include "shardwise/core/message_text.hpp"

namespace shardwise::cli {
namespace {

template <typename T>
bool parse_decimal(const std::string& text, T& value) {
  const char* begin = text.data();
  const char* end = begin + text.size();
  const auto [stop, ec] = std::from_chars(begin, end, value);  // base 10, no '+', no spaces
  return !text.empty() && ec == std::errc() && stop == end;
}

}  // namespace

CLI::Validator integer_in(std::int64_t low, std::int64_t high) {
  const std::string range = "[" + std::to_string(low) + ", " + std::to_string(high) + "]";
  return CLI::Validator(
      [low, high, range](std::string& input) -> std::string {
        std::int64_t value = 0;
        if (!parse_decimal(input, value) || value < low || value > high) {
          return "expected an integer in " + range + ", got '" + printable(input) + "'";
        }
        return {};
      },
      "INT in " + range);
}

CLI::Validator unsigned_integer() {
  return CLI::Validator(
      [](std::string& input) -> std::string {
        std::uint64_t value = 0;
        if (!parse_decimal(input, value)) {
          return "expected an integer in [0, 18446744073709551615], got '" + printable(input) + "'";
        }
        return {};
      },
      "UINT");
}

}  // namespace shardwise::cli
