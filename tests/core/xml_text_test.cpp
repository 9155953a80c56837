// The one XML escaping routine the SVG writers (layout report, loss plot) share.
#include "shardwise/core/xml_text.hpp"

#include <gtest/gtest.h>

namespace shardwise {
namespace {

TEST(XmlEscape, ReplacesTheFiveMarkupCharactersAndKeepsTheRest) {
  EXPECT_EQ(xml_escape(R"(a<b>&"c"'d')"), "a&lt;b&gt;&amp;&quot;c&quot;&apos;d&apos;");
  EXPECT_EQ(xml_escape("layers.0.attn.qkv.weight [0, 4096) é"),
            "layers.0.attn.qkv.weight [0, 4096) é");
  EXPECT_EQ(xml_escape("&amp;"), "&amp;amp;");  // escapes text, not entities: no double meaning
  EXPECT_EQ(xml_escape(""), "");
}

TEST(XmlEscape, WhatXmlCannotHoldBecomesTheReplacementCharacter) {
  const std::string replacement = "\xEF\xBF\xBD";
  EXPECT_EQ(xml_escape(std::string("a\x01") + "b"), "a" + replacement + "b");
  EXPECT_EQ(xml_escape(std::string("\x1b[2J")), replacement + "[2J");
  EXPECT_EQ(xml_escape("tab\tnl\ncr\r"), "tab\tnl\ncr\r");  // the three XML allows
  EXPECT_EQ(xml_escape("bad\xff"), "bad" + replacement);
  EXPECT_EQ(xml_escape("\xc3\xa9\xe2\x82"), "\xc3\xa9" + replacement + replacement);
}

}  // namespace
}  // namespace shardwise
