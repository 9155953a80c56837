#include "cli_path.hpp"

#include <string>

namespace shardwise::cli {

CLI::Validator non_empty_path() {
  return CLI::Validator(
      [](std::string& value) {
        return value.empty() ? std::string("an empty path (an unset shell variable?)")
                             : std::string();
      },
      "PATH");
}

CLI::Validator non_empty_value() {
  return CLI::Validator(
      [](std::string& value) {
        return value.empty() ? std::string("an empty value (an unset shell variable?)")
                             : std::string();
      },
      "TEXT");
}

}  // namespace shardwise::cli
