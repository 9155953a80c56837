// Integer options with a range. CLI11's own conversion is too lenient for untrusted input: it
// reads "-1" as 2^64 - 1 into an unsigned option, saturates "99999999999999999999" to INT64_MAX,
// and takes "010" as octal; its PositiveNumber check compares a double. These validators read the
// text as a plain decimal integer and refuse it outside [low, high] before CLI11 converts it.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>

namespace shardwise::cli {

// A decimal integer in [low, high] (a leading '-' only where low < 0).
CLI::Validator integer_in(std::int64_t low, std::int64_t high);

// A decimal integer in [0, 2^64 - 1] (seeds): no sign.
CLI::Validator unsigned_integer();

}  // namespace shardwise::cli
