#include "shardwise/core/message_text.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>

#include "shardwise/core/error.hpp"

namespace shardwise {
namespace {

void append_hex_escape(std::string& out, const char* format, unsigned value) {
  char buffer[8];
  std::snprintf(buffer, sizeof(buffer), format, value);
  out += buffer;
}

}  // namespace

std::size_t utf8_sequence_length(std::string_view text, std::size_t at) {
  const auto byte = [&](std::size_t i) { return static_cast<std::uint8_t>(text[at + i]); };
  const std::uint8_t lead = byte(0);
  std::size_t length = 0;
  std::uint8_t low = 0x80, high = 0xBF;  // allowed range of the second byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) low = 0xA0;
    if (lead == 0xED) high = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) low = 0x90;
    if (lead == 0xF4) high = 0x8F;
  } else {
    return 0;
  }
  if (at + length > text.size()) return 0;
  if (byte(1) < low || byte(1) > high) return 0;
  for (std::size_t i = 2; i < length; ++i) {
    if (byte(i) < 0x80 || byte(i) > 0xBF) return 0;
  }
  return length;
}

std::size_t first_invalid_utf8(std::string_view text) {
  std::size_t at = 0;
  while (at < text.size()) {
    if (static_cast<std::uint8_t>(text[at]) < 0x80) {
      ++at;
      continue;
    }
    const std::size_t length = utf8_sequence_length(text, at);
    if (length == 0) return at;
    at += length;
  }
  return at;
}

std::string printable(std::string_view text, std::size_t max_bytes) {
  std::string out;
  std::size_t at = 0;
  while (at < text.size()) {
    const auto c = static_cast<std::uint8_t>(text[at]);
    std::size_t length = 1;
    if (c < 0x80) {
      if (at + 1 > max_bytes) break;
      switch (c) {
        case '\n':
          out += "\\n";
          break;
        case '\r':
          out += "\\r";
          break;
        case '\t':
          out += "\\t";
          break;
        case '\\':
          out += "\\\\";
          break;
        default:
          if (c < 0x20 || c == 0x7F) {
            append_hex_escape(out, "\\x%02x", c);
          } else {
            out += static_cast<char>(c);
          }
      }
    } else if ((length = utf8_sequence_length(text, at)) == 0) {
      if (at + 1 > max_bytes) break;
      append_hex_escape(out, "\\x%02x", c);  // not UTF-8: show the byte
      length = 1;
    } else {
      if (at + length > max_bytes) break;
      const auto second = static_cast<std::uint8_t>(text[at + 1]);
      if (c == 0xC2 && second <= 0x9F) {
        append_hex_escape(out, "\\u%04x", second);  // C1 control (U+0080..U+009F), e.g. CSI
      } else {
        out.append(text.substr(at, length));
      }
    }
    at += length;
  }
  if (at < text.size()) out += "...(" + std::to_string(text.size()) + " bytes)";
  return out;
}

}  // namespace shardwise

namespace shardwise {

std::string one_line(std::string_view message, std::size_t max_bytes) {
  std::string out;
  out.reserve(std::min(message.size(), max_bytes) + 16);
  for (const char c : message.substr(0, max_bytes)) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 && byte != 0x7f) {
      out += c;
      continue;
    }
    static constexpr char kHex[] = "0123456789abcdef";
    out += "\\x";
    out += kHex[byte >> 4];
    out += kHex[byte & 0xf];
  }
  if (message.size() > max_bytes) out += str_cat("...(", message.size(), " bytes)");
  return out;
}

std::string quoted(const std::filesystem::path& path) { return str_cat("'", path.string(), "'"); }

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace shardwise
