// Boolean option values given as text (--grad-reduce-fp32 true, --bias no): one spelling rule for
// every subcommand.
#pragma once

#include <string>

namespace shardwise::cli {

// true / yes / on / 1 and false / no / off / 0, in any case (as CLI11 reads its flags); anything
// else is an InvalidArgument naming the option.
bool parse_bool_option(const std::string& value, const char* option);

}  // namespace shardwise::cli
