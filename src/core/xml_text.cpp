#include "shardwise/core/xml_text.hpp"

#include <cstdint>

#include "shardwise/core/message_text.hpp"

namespace shardwise {

std::string xml_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t at = 0; at < text.size();) {
    const auto c = static_cast<std::uint8_t>(text[at]);
    if (c >= 0x80) {
      // Bytes that are not UTF-8 would make the whole document ill-formed: U+FFFD instead.
      const std::size_t length = utf8_sequence_length(text, at);
      out += length > 0 ? text.substr(at, length) : std::string("\xEF\xBF\xBD");
      at += length > 0 ? length : 1;
      continue;
    }
    ++at;
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        // XML 1.0 has no way to write the C0 controls but tab, LF and CR, not even as entities.
        if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') {
          out += "\xEF\xBF\xBD";
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out;
}

}  // namespace shardwise
