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

}  // namespace
}  // namespace shardwise
