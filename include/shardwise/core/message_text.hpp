// Quoting untrusted text (tensor names, JSON values, file contents) in error messages: the CLI
// prints a message as one line on a terminal, so a name holding "\n" or an ANSI escape sequence
// must not reach it raw, and a megabyte-long value must not be copied whole into a message.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace shardwise {

// Default cap, in bytes of the input, for a quoted untrusted value.
inline constexpr std::size_t kMessageQuoteLimit = 64;

// `text` made safe for a one-line message: C0/C1 control characters, DEL, backslash and bytes
// that are not valid UTF-8 are written as escapes (\n, \t, \\, \x1b, \u0085, ...); printable
// UTF-8 passes unchanged. Only the first `max_bytes` bytes of the input are kept (never cutting a
// UTF-8 sequence); when more follow, "...(N bytes)" with the full length is appended.
std::string printable(std::string_view text, std::size_t max_bytes = kMessageQuoteLimit);

// 'PATH', quotes included: how messages name a file or directory the program chose or was given.
std::string quoted(const std::filesystem::path& path);

// Length of the valid UTF-8 sequence of two to four bytes starting at text[at], or 0 when there
// is none (ASCII, overlong forms, surrogates and code points past U+10FFFF give 0).
std::size_t utf8_sequence_length(std::string_view text, std::size_t at);

// Offset of the first byte of `text` that does not start a valid UTF-8 sequence (ASCII counts as
// valid); text.size() when all of it is valid. JSON strings must be UTF-8: a value that ends up
// in a JSON file (a config path recorded in a checkpoint manifest) is checked with this first.
std::size_t first_invalid_utf8(std::string_view text);

}  // namespace shardwise

namespace shardwise {

// Cap for a whole error or warning line (messages quote values through printable(), so only a
// message built without it can come near this).
inline constexpr std::size_t kMessageLineLimit = 16384;

// The last line of defence before an error or warning reaches a terminal: C0 control characters
// and DEL become \xNN so that the message stays one line and carries no escape sequence, whatever
// a message that quoted input without printable() holds. Backslashes and UTF-8 pass unchanged (a
// message already escaped by printable() reads the same); longer than `max_bytes`, the line is cut
// and "...(N bytes)" appended.
std::string one_line(std::string_view message, std::size_t max_bytes = kMessageLineLimit);

// "[4096, 8192]": a tensor shape for a message.
std::string shape_text(const std::vector<std::int64_t>& shape);

}  // namespace shardwise
