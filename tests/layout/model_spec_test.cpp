#include "shardwise/layout/model_spec.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "shardwise/core/error.hpp"

namespace shardwise {
namespace {

// Runs fn, expects ErrorType, and checks that every fragment appears in the message.
template <typename ErrorType, typename Fn>
void expect_error(Fn&& fn, std::initializer_list<std::string> fragments) {
  try {
    fn();
    FAIL() << "expected an error mentioning " << *fragments.begin();
  } catch (const ErrorType& e) {
    const std::string message = e.what();
    for (const auto& fragment : fragments) {
      EXPECT_NE(message.find(fragment), std::string::npos)
          << "message '" << message << "' lacks '" << fragment << "'";
    }
  }
}

ModelSpec parse(const std::string& text) { return parse_model_spec(text, "spec.json"); }

std::string with_param(const std::string& param) {
  return R"({"name": "m", "params": [{"name": "a", "shape": [4, 8]}, )" + param + "]}";
}

TEST(ModelSpec, ParsesEveryField) {
  const ModelSpec spec = parse(R"({"name": "toy", "params": [
    {"name": "emb", "shape": [100, 16], "dtype": "bf16", "embedding_or_output": true,
     "shared_embedding": true},
    {"name": "qkv", "shape": [48, 16], "dtype": "fp32", "grad_dtype": "fp32", "use_muon": true,
     "qkv_split": [16, 16, 16]},
    {"name": "expert", "shape": [32, 16], "expert_parallel": true, "use_muon": false},
    {"name": "norm", "shape": [16], "use_muon": null}]})");
  EXPECT_EQ(spec.name, "toy");
  ASSERT_EQ(spec.params.size(), 4u);
  const ParamInfo& emb = spec.params[0];
  EXPECT_EQ(emb.shape, (std::vector<std::int64_t>{100, 16}));
  EXPECT_EQ(emb.dtype, DType::kBFloat16);
  EXPECT_FALSE(emb.grad_dtype.has_value());
  EXPECT_TRUE(emb.embedding_or_output);
  EXPECT_TRUE(emb.shared_embedding);
  EXPECT_FALSE(emb.expert_parallel);
  const ParamInfo& qkv = spec.params[1];
  EXPECT_EQ(qkv.dtype, DType::kFloat32);
  EXPECT_EQ(qkv.grad_dtype, DType::kFloat32);
  EXPECT_EQ(qkv.use_muon, true);
  EXPECT_EQ(qkv.qkv_split, (std::vector<std::int64_t>{16, 16, 16}));
  EXPECT_TRUE(spec.params[2].expert_parallel);
  EXPECT_EQ(spec.params[2].use_muon, false);
  EXPECT_EQ(spec.params[2].dtype, DType::kBFloat16);  // default dtype
  EXPECT_FALSE(spec.params[3].use_muon.has_value());
  EXPECT_EQ(spec.total_numel(), 1600 + 768 + 512 + 16);
}

TEST(ModelSpec, MalformedJsonNamesTheSource) {
  expect_error<FormatError>([] { parse(R"({"name": "m", "params": [)"); },
                            {"spec.json", "malformed JSON"});
  expect_error<FormatError>([] { parse("[1, 2]"); }, {"spec.json", "JSON object"});
  // A number too large for a double is an out_of_range error in nlohmann's parser, not a
  // parse_error: found by the fuzzer as an uncaught exception.
  expect_error<FormatError>([] { parse(R"({"name": "m", "params": [4444444e444]})"); },
                            {"spec.json", "malformed JSON", "overflow"});
  expect_error<FormatError>([] { parse(R"({"name": "m"})"); }, {"spec.json", "\"params\""});
  expect_error<FormatError>([] { parse(R"({"name": "m", "params": []})"); }, {"empty"});
  expect_error<FormatError>([] { parse(R"({"name": "m", "params": [], "extra": 1})"); },
                            {"unknown top-level field \"extra\""});
}

TEST(ModelSpec, UnknownFieldNamesParamAndField) {
  expect_error<FormatError>(
      [] { parse(with_param(R"({"name": "b", "shape": [3], "sharded": true})")); },
      {"spec.json", "params[1]", "\"b\"", "unknown field \"sharded\""});
}

TEST(ModelSpec, BadShapesAreRejected) {
  expect_error<FormatError>([] { parse(with_param(R"({"name": "b", "shape": []})")); },
                            {"params[1]", "\"b\"", "\"shape\"", "must not be empty"});
  expect_error<FormatError>([] { parse(with_param(R"({"name": "b", "shape": [3, 0]})")); },
                            {"params[1]", "\"shape\" entry 1", "positive"});
  expect_error<FormatError>([] { parse(with_param(R"({"name": "b", "shape": [-2, 3]})")); },
                            {"\"shape\" entry 0", "positive"});
  expect_error<FormatError>([] { parse(with_param(R"({"name": "b", "shape": [2.5]})")); },
                            {"\"shape\" entry 0", "integer"});
  expect_error<FormatError>([] { parse(with_param(R"({"name": "b", "shape": "3x4"})")); },
                            {"\"shape\"", "array"});
  expect_error<FormatError>([] { parse(with_param(R"({"name": "b"})")); },
                            {"params[1]", "missing required field \"shape\""});
  expect_error<FormatError>(
      [] { parse(with_param(R"({"name": "b", "shape": [4294967296, 4294967296]})")); },
      {"64 bits"});
}

TEST(ModelSpec, BadDtypesAreRejected) {
  expect_error<FormatError>(
      [] { parse(with_param(R"({"name": "b", "shape": [3], "dtype": "bf17"})")); },
      {"params[1]", "\"b\"", "field \"dtype\"", "bf17"});
  expect_error<FormatError>(
      [] { parse(with_param(R"({"name": "b", "shape": [3], "grad_dtype": "int32"})")); },
      {"field \"grad_dtype\"", "int32"});
  expect_error<FormatError>(
      [] { parse(with_param(R"({"name": "b", "shape": [3], "dtype": 16})")); },
      {"field \"dtype\""});
}

TEST(ModelSpec, BadFlagsAndQkvSplitAreRejected) {
  expect_error<FormatError>(
      [] { parse(with_param(R"({"name": "b", "shape": [3], "expert_parallel": "yes"})")); },
      {"field \"expert_parallel\"", "true or false"});
  expect_error<FormatError>(
      [] { parse(with_param(R"({"name": "b", "shape": [12, 4], "qkv_split": [4, 4, 5]})")); },
      {"\"qkv_split\"", "sums to 13", "shape[0] is 12"});
  expect_error<FormatError>(
      [] { parse(with_param(R"({"name": "b", "shape": [12, 4], "qkv_split": [6, 6]})")); },
      {"\"qkv_split\"", "3 entries"});
  expect_error<FormatError>(
      [] { parse(with_param(R"({"name": "b", "shape": [12], "qkv_split": [4, 4, 4]})")); },
      {"\"qkv_split\"", "2-D"});
  expect_error<FormatError>([] { parse(with_param(R"({"shape": [3]})")); },
                            {"params[1]", "missing required field \"name\""});
  expect_error<FormatError>([] { parse(with_param(R"({"name": "", "shape": [3]})")); },
                            {"params[1]", "\"name\" must not be empty"});
}

TEST(ModelSpec, DuplicateNamesAreRejected) {
  expect_error<FormatError>([] { parse(with_param(R"({"name": "a", "shape": [3]})")); },
                            {"spec.json", "params[1]", "duplicate param name \"a\""});
}

TEST(ModelSpec, RoundTripsThroughJsonAndFile) {
  ModelSpec spec;
  spec.name = "round \"trip\"";
  ParamInfo a;
  a.name = "layers.0.attn.qkv.weight";
  a.shape = {96, 32};
  a.qkv_split = {32, 32, 32};
  a.use_muon = true;
  ParamInfo b;
  b.name = "emb";
  b.shape = {50, 32};
  b.dtype = DType::kFloat16;
  b.grad_dtype = DType::kFloat32;
  b.embedding_or_output = true;
  b.shared_embedding = true;
  ParamInfo c;
  c.name = "experts.3.fc1.weight";
  c.shape = {2, 3, 4};
  c.dtype = DType::kFloat8E4M3;
  c.expert_parallel = true;
  c.use_muon = false;
  spec.params = {a, b, c};

  auto expect_same = [&](const ModelSpec& back) {
    EXPECT_EQ(back.name, spec.name);
    ASSERT_EQ(back.params.size(), spec.params.size());
    for (std::size_t i = 0; i < spec.params.size(); ++i) {
      const ParamInfo& x = spec.params[i];
      const ParamInfo& y = back.params[i];
      EXPECT_EQ(x.name, y.name);
      EXPECT_EQ(x.shape, y.shape);
      EXPECT_EQ(x.dtype, y.dtype);
      EXPECT_EQ(x.grad_dtype, y.grad_dtype);
      EXPECT_EQ(x.shared_embedding, y.shared_embedding);
      EXPECT_EQ(x.expert_parallel, y.expert_parallel);
      EXPECT_EQ(x.embedding_or_output, y.embedding_or_output);
      EXPECT_EQ(x.use_muon, y.use_muon);
      EXPECT_EQ(x.qkv_split, y.qkv_split);
    }
  };
  const std::string text = model_spec_to_json(spec);
  expect_same(parse_model_spec(text, "memory"));

  const auto dir = std::filesystem::temp_directory_path() /
                   ("shardwise_model_spec_test_" +
                    std::to_string(::testing::UnitTest::GetInstance()->random_seed()));
  std::filesystem::create_directories(dir);
  const auto path = dir / "spec.json";
  save_model_spec(spec, path);
  expect_same(load_model_spec(path));
  // Saving again replaces the file and leaves no temp files behind.
  spec.params.pop_back();
  save_model_spec(spec, path);
  EXPECT_EQ(load_model_spec(path).params.size(), 2u);
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), {}), 1);
  std::filesystem::remove_all(dir);
}

TEST(ModelSpec, MissingFileIsAnIoErrorNamingThePath) {
  expect_error<IoError>([] { load_model_spec("/nonexistent/dir/spec.json"); },
                        {"/nonexistent/dir/spec.json"});
}

TEST(ModelSpec, ErrorsFromFilesNameTheFile) {
  const auto path = std::filesystem::temp_directory_path() / "shardwise_bad_spec_test.json";
  {
    std::ofstream out(path);
    out << with_param(R"({"name": "a", "shape": [3]})");
  }
  expect_error<FormatError>([&] { load_model_spec(path); }, {path.string(), "duplicate"});
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace shardwise
