#include "cli_path.hpp"

#include <string>
#include <utility>

namespace shardwise::cli {

namespace {

CLI::Validator refusing_empty(std::string message, std::string type_name) {
  return CLI::Validator([message = std::move(message)](
                            std::string& value) { return value.empty() ? message : std::string(); },
                        std::move(type_name));
}

}  // namespace

CLI::Validator non_empty_path() {
  return refusing_empty("an empty path (an unset shell variable?)", "PATH");
}

CLI::Validator non_empty_value() {
  return refusing_empty("an empty value (an unset shell variable?)", "TEXT");
}

}  // namespace shardwise::cli
