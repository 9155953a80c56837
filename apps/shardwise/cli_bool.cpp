#include "cli_bool.hpp"

#include "shardwise/core/error.hpp"
#include "shardwise/core/message_text.hpp"

namespace shardwise::cli {

bool parse_bool_option(const std::string& value, const char* option) {
  if (value == "true" || value == "1" || value == "yes") return true;
  if (value == "false" || value == "0" || value == "no") return false;
  throw InvalidArgument(str_cat(option, ": expected true or false, got '", printable(value), "'"));
}

}  // namespace shardwise::cli
