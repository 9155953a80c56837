// Model specs from hostile input: deep nesting, huge values echoed in messages, element counts
// that overflow, and generated specs whose sizes no real model has.
#include <gtest/gtest.h>

#include <string>

#include "shardwise/core/error.hpp"
#include "shardwise/layout/model_spec.hpp"
#include "shardwise/layout/model_zoo.hpp"

namespace shardwise {
namespace {

template <typename E = FormatError>
std::string spec_limits_error(const std::string& text) {
  try {
    parse_model_spec(text, "spec.json");
  } catch (const E& e) {
    return e.what();
  }
  return "";
}

std::string generate_error(const TransformerConfig& config) {
  try {
    generate_model_spec(config);
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "";
}

TransformerConfig tiny_transformer() {
  TransformerConfig c;
  c.name = "tiny";
  c.num_layers = 2;
  c.hidden_size = 64;
  c.ffn_hidden_size = 128;
  c.num_attention_heads = 4;
  c.vocab_size = 100;
  return c;
}

TEST(ModelSpecLimits, DeepNestingIsRefusedCleanly) {
  // 1 MB of nested arrays in a field value: the error path used to dump() it recursively.
  const std::string deep = std::string(1 << 20, '[') + std::string(1 << 20, ']');
  const std::string message = spec_limits_error(
      "{\"name\": \"m\", \"params\": [{\"name\": \"w\", \"shape\": " + deep + "}]}");
  EXPECT_NE(message.find("spec.json: JSON nests deeper than 64 levels"), std::string::npos)
      << message;
  // Within the limit, the value is reported cut.
  const std::string nested = std::string(60, '[') + std::string(60, ']');
  const std::string shape_message =
      spec_limits_error("{\"params\": [{\"name\": \"w\", \"shape\": [" + nested + "]}]}");
  EXPECT_NE(shape_message.find("must be an integer, got array [[[["), std::string::npos)
      << shape_message;
  EXPECT_LT(shape_message.size(), 300u);
}

TEST(ModelSpecLimits, HugeNamesAndValuesAreCut) {
  const std::string huge(10 << 20, 'n');
  const std::string name_message =
      spec_limits_error("{\"params\": [{\"name\": \"" + huge + "\", \"shape\": [0]}]}");
  EXPECT_NE(name_message.find("(10485760 bytes)"), std::string::npos);
  EXPECT_LT(name_message.size(), 600u);
  const std::string field_message =
      spec_limits_error("{\"params\": [{\"name\": \"w\", \"shape\": [2], \"" + huge + "\": 1}]}");
  EXPECT_NE(field_message.find("unknown field \"nnnn"), std::string::npos);
  EXPECT_LT(field_message.size(), 600u);
  const std::string dtype_message = spec_limits_error(
      "{\"params\": [{\"name\": \"w\", \"shape\": [2], \"dtype\": \"" + huge + "\"}]}");
  EXPECT_LT(dtype_message.size(), 600u);
  const std::string value_message = spec_limits_error(
      "{\"params\": [{\"name\": \"w\", \"shape\": [2], \"use_muon\": \"" + huge + "\"}]}");
  EXPECT_NE(value_message.find("must be true or false"), std::string::npos);
  EXPECT_LT(value_message.size(), 600u);
}

TEST(ModelSpecLimits, ElementCountsAreOverflowChecked) {
  // A param whose element count fits in int64 (just under 2^63) but is past what a layout holds
  // (2^50) is refused before any sum over params could overflow.
  const std::string big = "[3037000499, 3037000499]";
  const std::string message =
      spec_limits_error<Error>("{\"params\": [{\"name\": \"a\", \"shape\": " + big +
                               "}, {\"name\": \"b\", \"shape\": " + big + "}]}");
  EXPECT_NE(message.find("param a: shape [3037000499, 3037000499] has more than 1125899906842624 "
                         "elements"),
            std::string::npos)
      << message;
  // qkv_split entries each fit, their sum overflowed (signed overflow, UB).
  const std::string qkv = spec_limits_error(
      "{\"params\": [{\"name\": \"q\", \"shape\": [6, 2], \"qkv_split\": "
      "[9223372036854775807, 9223372036854775807, 6]}]}");
  EXPECT_NE(qkv.find("\"qkv_split\" sums to more than 2^63 but shape[0] is 6"), std::string::npos)
      << qkv;
}

TEST(ModelSpecLimits, GeneratedSizesPastRealModelsAreRefused) {
  TransformerConfig c = tiny_transformer();
  c.num_layers = 2'000'000'000;
  EXPECT_NE(generate_error(c).find("layers must be <= 100000, got 2000000000"), std::string::npos);
  c = tiny_transformer();
  c.hidden_size = std::int64_t{1} << 40;
  EXPECT_NE(generate_error(c).find("hidden must be <= 16777216"), std::string::npos);
  c = tiny_transformer();
  c.vocab_size = std::int64_t{1} << 62;
  EXPECT_NE(generate_error(c).find("vocab must be <="), std::string::npos);
  // Each size allowed, the list of params they make too long to generate.
  c = tiny_transformer();
  c.num_layers = 100'000;
  c.num_experts = 65'536;
  c.moe_ffn_hidden_size = 8;
  EXPECT_NE(generate_error(c).find("params in the spec: layers (100000) x params per layer "
                                   "(524304)"),
            std::string::npos)
      << generate_error(c);
  // Within the bounds, layers keep generating as before.
  c = tiny_transformer();
  c.num_layers = 1;
  const std::size_t one = generate_model_spec(c).params.size();
  c.num_layers = 2;
  const std::size_t per_layer = generate_model_spec(c).params.size() - one;
  c.num_layers = 1000;
  EXPECT_EQ(generate_model_spec(c).params.size(), one + 999 * per_layer);
}

}  // namespace
}  // namespace shardwise
