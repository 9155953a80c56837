// Text placed inside XML/SVG markup (element text or a double- or single-quoted attribute).
#pragma once

#include <string>

namespace shardwise {

// Replaces the five characters XML gives meaning to (& < > " ') with their entities.
std::string xml_escape(const std::string& text);

}  // namespace shardwise
