#include "shardwise/core/message_text.hpp"

#include <gtest/gtest.h>

#include <random>
#include <string>

#include "shardwise/core/logging.hpp"

namespace shardwise {
namespace {

using namespace std::string_literals;

TEST(MessageText, PrintableTextPassesUnchanged) {
  EXPECT_EQ(printable("layers.0.mlp.fc1.weight"), "layers.0.mlp.fc1.weight");
  EXPECT_EQ(printable("gr\xc3\xbc\xc3\x9f \xe2\x82\xac \xf0\x9f\x98\x80"),
            "gr\xc3\xbc\xc3\x9f \xe2\x82\xac \xf0\x9f\x98\x80");  // ü ß € and an emoji
  EXPECT_EQ(printable(""), "");
}

TEST(MessageText, ControlCharactersAreEscaped) {
  EXPECT_EQ(printable("a\nb\rc\td\\e"), "a\\nb\\rc\\td\\\\e");
  EXPECT_EQ(printable("x\x1b[2J\x1b[Hy"), "x\\x1b[2J\\x1b[Hy");  // ANSI clear screen
  EXPECT_EQ(printable("nul\0end"s), "nul\\x00end");
  EXPECT_EQ(printable("del\x7f"), "del\\x7f");
  EXPECT_EQ(printable("csi\xc2\x9b"
                      "2J"),
            "csi\\u009b2J");  // C1 control U+009B
}

TEST(MessageText, InvalidUtf8BytesAreEscaped) {
  EXPECT_EQ(printable("a\xff"
                      "b"),
            "a\\xffb");
  EXPECT_EQ(printable("\xc0\xaf"), "\\xc0\\xaf");           // overlong '/'
  EXPECT_EQ(printable("\xed\xa0\x80"), "\\xed\\xa0\\x80");  // surrogate U+D800
  EXPECT_EQ(printable("\xe2\x82"), "\\xe2\\x82");           // truncated sequence
}

TEST(MessageText, FirstInvalidUtf8ByteIsFound) {
  EXPECT_EQ(first_invalid_utf8(""), 0u);
  EXPECT_EQ(first_invalid_utf8("plain/path.txt"), 14u);
  EXPECT_EQ(first_invalid_utf8("caf\xc3\xa9 \xf0\x9f\x98\x80"), 10u);  // all valid: its size
  EXPECT_EQ(first_invalid_utf8("ab\xff"), 2u);
  EXPECT_EQ(first_invalid_utf8("a\xc0\xaf"), 1u);         // overlong '/'
  EXPECT_EQ(first_invalid_utf8("x\xed\xa0\x80"), 1u);     // surrogate
  EXPECT_EQ(first_invalid_utf8("\xc3\xa9\xe2\x82"), 2u);  // truncated at the end
}

TEST(MessageText, LongTextIsTruncatedWithItsLength) {
  const std::string name(1'000'000, 'n');
  EXPECT_EQ(printable(name), std::string(64, 'n') + "...(1000000 bytes)");
  EXPECT_EQ(printable(std::string(64, 'x')), std::string(64, 'x'));
  EXPECT_EQ(printable("abcdef", 3), "abc...(6 bytes)");
  // A multi-byte character that does not fit is left out whole.
  EXPECT_EQ(printable("ab\xe2\x82\xac", 4), "ab...(5 bytes)");
}

// Whatever the bytes, the result is one line of printable ASCII or valid UTF-8 without C1
// controls, and bounded by the cap.
TEST(MessageText, RandomBytesNeverYieldControlCharacters) {
  std::mt19937 rng(12);
  for (int trial = 0; trial < 2000; ++trial) {
    std::string text(rng() % 200, '\0');
    for (char& c : text) c = static_cast<char>(rng() % 256);
    const std::string out = printable(text);
    EXPECT_LE(out.size(), 4 * kMessageQuoteLimit + 32);
    for (std::size_t i = 0; i < out.size(); ++i) {
      const auto c = static_cast<unsigned char>(out[i]);
      ASSERT_FALSE(c < 0x20 || c == 0x7f) << "control byte in output of trial " << trial;
      if (c == 0xc2 && i + 1 < out.size()) {
        ASSERT_GT(static_cast<unsigned char>(out[i + 1]), 0x9f) << "C1 control in output";
      }
    }
  }
}

TEST(MessageText, OneLineEscapesControlBytesAndKeepsTheRest) {
  EXPECT_EQ(one_line("name 'a\nb\x1b[2J' is bad"), "name 'a\\x0ab\\x1b[2J' is bad");
  // Already escaped text and UTF-8 pass unchanged.
  EXPECT_EQ(one_line("is 'x\\n' \xe2\x82\xac"), "is 'x\\n' \xe2\x82\xac");
  EXPECT_EQ(one_line(std::string(10, 'z'), 4), "zzzz...(10 bytes)");
}

// Errors and warnings go through one_line on their way to the terminal; info lines do not.
TEST(MessageText, ErrorLogLinesCarryNoControlBytes) {
  testing::internal::CaptureStderr();
  log::error("tensor 'evil\n\x1b[2Jname' is bad");
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(err, "shardwise: error: tensor 'evil\\x0a\\x1b[2Jname' is bad\n");
}

}  // namespace
}  // namespace shardwise
