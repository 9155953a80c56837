// Bounded JSON reading (core/json_text.hpp) and overflow-checked size products
// (core/checked_size.hpp).
#include "shardwise/core/json_text.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <random>
#include <string>

#include "shardwise/core/checked_size.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise {
namespace {

std::string nested_json(int levels, char open = '[', char close = ']') {
  return std::string(static_cast<std::size_t>(levels), open) +
         std::string(static_cast<std::size_t>(levels), close);
}

std::string format_error_of(std::string_view text, int max_depth = kMaxJsonDepth) {
  try {
    parse_json_text(text, "doc.json", max_depth);
  } catch (const FormatError& e) {
    return e.what();
  }
  return "";
}

TEST(JsonText, NestingDepthCountsBracketsOutsideStrings) {
  EXPECT_EQ(json_nesting_depth("1", 64), 0);
  EXPECT_EQ(json_nesting_depth("[]", 64), 1);
  EXPECT_EQ(json_nesting_depth(R"({"a": [1, {"b": []}], "c": {}})", 64), 4);
  // Brackets inside strings, escaped quotes and escaped backslashes do not count.
  EXPECT_EQ(json_nesting_depth(R"(["[[[[", "\"[[[", "\\", [2]])", 64), 2);
  EXPECT_EQ(json_nesting_depth(R"({"k\\": "]]]]"})", 64), 1);
  // Stops as soon as the limit is passed, with a value above it.
  EXPECT_GT(json_nesting_depth(nested_json(1'000'000), 64), 64);
}

// A random JSON value up to `levels` deep whose strings hold brackets, quotes and backslashes.
nlohmann::json random_value(std::mt19937& rng, int levels) {
  static const char* const strings[] = {"[", "]}", "\\", "\"[{", "x\\\"]", "plain"};
  const unsigned pick = rng() % 4;
  if (levels == 0 || pick == 0) return std::string(strings[rng() % std::size(strings)]);
  if (pick == 1) return static_cast<int>(rng() % 100);
  nlohmann::json out = pick == 2 ? nlohmann::json::array() : nlohmann::json::object();
  const int children = static_cast<int>(rng() % 4);
  for (int i = 0; i < children; ++i) {
    nlohmann::json child = random_value(rng, levels - 1);
    if (out.is_array()) {
      out.push_back(std::move(child));
    } else {
      out[strings[rng() % std::size(strings)] + std::to_string(i)] = std::move(child);
    }
  }
  return out;
}

// Independent reference: the depth of the parsed value, walked recursively.
int depth_of(const nlohmann::json& v) {
  if (!v.is_structured()) return 0;
  int deepest = 0;
  for (const auto& child : v) deepest = std::max(deepest, depth_of(child));
  return deepest + 1;
}

TEST(JsonText, DepthAgreesWithTheDocumentOnRandomValues) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 500; ++trial) {
    const nlohmann::json value = random_value(rng, 8);
    const std::string text = value.dump(trial % 2 ? 2 : -1);
    EXPECT_EQ(json_nesting_depth(text, 64), depth_of(value)) << text;
    EXPECT_EQ(parse_json_text(text, "doc.json"), value);
  }
}

TEST(JsonText, DeepNestingIsRefusedBeforeParsing) {
  EXPECT_NO_THROW(parse_json_text(nested_json(kMaxJsonDepth), "doc.json"));
  const std::string message = format_error_of(nested_json(kMaxJsonDepth + 1));
  EXPECT_NE(message.find("doc.json: JSON nests deeper than 64 levels"), std::string::npos)
      << message;
  // 1 MB of '[' (what overflowed the stack in the error path) fails fast and cleanly.
  EXPECT_NE(format_error_of(std::string(1 << 20, '[')).find("nests deeper"), std::string::npos);
  EXPECT_NE(format_error_of(nested_json(4, '{', '}'), 3).find("deeper than 3"), std::string::npos);
}

TEST(JsonText, ParseErrorsAreCut) {
  // nlohmann quotes the last token read: a 1 MB string token must not reach the message whole.
  const std::string text = "[\"" + std::string(1 << 20, 'x');
  const std::string message = format_error_of(text);
  EXPECT_NE(message.find("doc.json: malformed JSON"), std::string::npos) << message;
  EXPECT_LT(message.size(), 600u);
  EXPECT_NE(format_error_of("[1e999]").find("malformed JSON"), std::string::npos);
}

TEST(JsonText, ParseErrorsLeaveOutTheLibrarysExceptionId) {
  const std::string message = format_error_of("[1,");
  EXPECT_NE(message.find("doc.json: malformed JSON: "), std::string::npos) << message;
  EXPECT_EQ(message.find("json.exception"), std::string::npos) << message;
  try {
    (void)nlohmann::json(3).get<std::string>();
    ADD_FAILURE() << "a number read as a string";
  } catch (const nlohmann::json::exception& e) {
    EXPECT_EQ(json_error_text(e), "type must be string, but is number");
  }
}

// A binary file (a safetensors header starts with its length as 8 little-endian bytes) is
// called binary, not "nests deeper": its '[' bytes came before the NUL check.
TEST(JsonText, ABinaryFileIsCalledOneBeforeItsBracketsAreCounted) {
  std::string binary("\x10\0\0\0\0\0\0\0", 8);
  binary += std::string(100, '[');
  const std::string message = format_error_of(binary);
  EXPECT_NE(message.find("a NUL byte at offset 1; JSON text has none (a binary file?)"),
            std::string::npos)
      << message;
}

TEST(JsonText, ExcerptIsBoundedAndEscaped) {
  const nlohmann::json big = std::string(100000, 'y');
  EXPECT_LT(json_excerpt(big).size(), 100u);
  EXPECT_EQ(json_excerpt(nlohmann::json::array({1, 2})), "[1,2]");
  EXPECT_EQ(json_excerpt(nlohmann::json("a\nb")), "\"a\\\\nb\"");
}

TEST(CheckedSize, ProductWithinLimit) {
  EXPECT_EQ(product_within({{"a", 3}, {"b", 5}}, 15), 15);
  EXPECT_FALSE(product_within({{"a", 3}, {"b", 5}}, 14).has_value());
  EXPECT_FALSE(product_within({{"pp", 65536}, {"vp", 65536}, {"x", std::int64_t{1} << 40}},
                              std::numeric_limits<std::int64_t>::max())
                   .has_value())
      << "2^72 overflows int64";
  EXPECT_EQ(checked_mul(std::int64_t{1} << 31, std::int64_t{1} << 31), std::int64_t{1} << 62);
  EXPECT_FALSE(checked_mul(std::int64_t{1} << 32, std::int64_t{1} << 31).has_value());
  EXPECT_FALSE(checked_add(std::numeric_limits<std::int64_t>::max(), 1).has_value());
}

TEST(CheckedSize, RefusalNamesEveryFactor) {
  try {
    checked_product<ConfigError>({{"parallel.pp", 65536}, {"parallel.vp", 65536}}, 100'000,
                                 "pipeline stages");
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(),
                 "pipeline stages: parallel.pp (65536) x parallel.vp (65536) = 4294967296 "
                 "exceeds the limit of 100000");
  }
  try {
    checked_product<InvalidArgument>({{"a", std::int64_t{1} << 40}, {"b", std::int64_t{1} << 40}});
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_STREQ(e.what(), "a (1099511627776) x b (1099511627776) overflows 64 bits");
  }
  EXPECT_EQ(checked_product<ConfigError>({{"tp", 8}, {"pp", 4}}, 32), 32);
}

}  // namespace
}  // namespace shardwise
