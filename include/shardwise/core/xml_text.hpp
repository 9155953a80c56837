// Text placed inside XML/SVG markup (element text or a double- or single-quoted attribute).
#pragma once

#include <string>

namespace shardwise {

// Replaces the five characters XML gives meaning to (& < > " ') with their entities, and what
// XML 1.0 cannot hold at all (C0 controls other than tab, LF and CR; bytes that are not UTF-8)
// with U+FFFD, so the document stays well-formed whatever a name holds.
std::string xml_escape(const std::string& text);

}  // namespace shardwise
