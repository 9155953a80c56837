// safetensors <-> MXFP8 conversion: bit-exact against quantize_mxfp8 on whole tensors, round trip
// within the format's error bound, selection rules, metadata, partial blocks, chunked streaming
// and error handling.
#include "shardwise/checkpoint/mxfp8_convert.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "shardwise/checkpoint/safetensors.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/core/float_convert.hpp"

namespace shardwise {
namespace {

namespace fs = std::filesystem;

// One input tensor kept in memory (raw little-endian bytes) so tests can compare with it.
struct SourceTensor {
  DType dtype;
  std::vector<std::int64_t> shape;
  std::vector<std::byte> bytes;

  std::int64_t numel() const {
    std::int64_t n = 1;
    for (auto d : shape) n *= d;
    return n;
  }
  TensorView view() { return {bytes.data(), numel(), dtype}; }
  float at(std::int64_t i) const {
    switch (dtype) {
      case DType::kFloat32: {
        float f;
        std::memcpy(&f, bytes.data() + i * 4, 4);
        return f;
      }
      case DType::kBFloat16: {
        std::uint16_t h;
        std::memcpy(&h, bytes.data() + i * 2, 2);
        return bf16_to_float(h);
      }
      case DType::kFloat16: {
        std::uint16_t h;
        std::memcpy(&h, bytes.data() + i * 2, 2);
        return fp16_to_float(h);
      }
      default:
        ADD_FAILURE() << "not a float dtype";
        return 0;
    }
  }
};

// Random values whose magnitude varies by row (2^-20 .. 2^12) so blocks get different scales.
SourceTensor random_tensor(DType dtype, std::vector<std::int64_t> shape, std::uint32_t seed) {
  SourceTensor t{dtype, std::move(shape), {}};
  const std::int64_t n = t.numel();
  t.bytes.resize(static_cast<std::size_t>(n) * dtype_size(dtype));
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const std::int64_t cols = t.shape.empty() ? 1 : t.shape.back();
  for (std::int64_t i = 0; i < n; ++i) {
    const int exponent = static_cast<int>((i / cols) % 33) - 20;
    float v = normal(rng) * std::ldexp(1.0f, dtype == DType::kFloat16 ? exponent / 3 : exponent);
    if (i % 97 == 5) v = 0.0f;
    switch (dtype) {
      case DType::kFloat32:
        std::memcpy(t.bytes.data() + i * 4, &v, 4);
        break;
      case DType::kBFloat16: {
        const std::uint16_t h = float_to_bf16(v);
        std::memcpy(t.bytes.data() + i * 2, &h, 2);
        break;
      }
      case DType::kFloat16: {
        const std::uint16_t h = float_to_fp16(v);
        std::memcpy(t.bytes.data() + i * 2, &h, 2);
        break;
      }
      default: {
        const std::int64_t k = i * 7 - 3;
        std::memcpy(t.bytes.data() + i * dtype_size(dtype), &k, dtype_size(dtype));
        break;
      }
    }
  }
  return t;
}

class Mxfp8ConvertTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("shardwise_mxfp8_convert_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    tensors_["layers.0.attn.qkv.weight"] = random_tensor(DType::kBFloat16, {64, 96}, 1);
    tensors_["layers.0.mlp.fc1.weight"] = random_tensor(DType::kFloat32, {33, 80}, 2);
    tensors_["layers.0.mlp.fc2.weight"] = random_tensor(DType::kFloat16, {130, 40}, 3);
    tensors_["layers.0.attn.qkv.bias"] = random_tensor(DType::kFloat32, {96}, 4);
    tensors_["embedding.word_embeddings.weight"] = random_tensor(DType::kBFloat16, {50, 64}, 5);
    tensors_["layers.0.input_layernorm.weight"] = random_tensor(DType::kFloat32, {64}, 6);
    tensors_["output_layer.weight"] = random_tensor(DType::kBFloat16, {50, 64}, 7);
    tensors_["step"] = random_tensor(DType::kInt64, {1}, 8);
    write_input(input());
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path input() const { return dir_ / "in.safetensors"; }
  fs::path path(const std::string& name) const { return dir_ / name; }

  void write_input(const fs::path& p) {
    SafetensorsWriter writer;
    for (auto& [name, t] : tensors_) writer.add(name, t.dtype, t.shape, t.bytes.data());
    writer.set_metadata("format", "pt");
    writer.write_atomic(p);
  }

  fs::path dir_;
  std::map<std::string, SourceTensor> tensors_;
};

const std::set<std::string> kDefaultConverted = {
    "layers.0.attn.qkv.weight", "layers.0.mlp.fc1.weight", "layers.0.mlp.fc2.weight"};

std::vector<std::uint8_t> bytes_of(const SafetensorsFile& f, const std::string& name) {
  const SafetensorsTensorView v = f.tensor(name);
  const auto* p = reinterpret_cast<const std::uint8_t*>(v.data);
  return {p, p + v.nbytes()};
}

// Checks every converted tensor of `out` against quantize_mxfp8 on the source, byte for byte.
void expect_bit_exact(std::map<std::string, SourceTensor>& src, const SafetensorsFile& out,
                      const std::set<std::string>& converted, const Mxfp8Options& options) {
  for (auto& [name, t] : src) {
    SCOPED_TRACE(name);
    if (!converted.contains(name)) {
      ASSERT_TRUE(out.contains(name));
      EXPECT_EQ(out.info(name).dtype, t.dtype);
      EXPECT_EQ(out.info(name).shape, t.shape);
      const auto copied = bytes_of(out, name);
      ASSERT_EQ(copied.size(), t.bytes.size());
      EXPECT_EQ(std::memcmp(copied.data(), t.bytes.data(), copied.size()), 0);
      EXPECT_FALSE(out.contains(name + "_scale"));
      continue;
    }
    const std::int64_t rows = t.shape[0], cols = t.shape[1];
    const Mxfp8Tensor ref = quantize_mxfp8(t.view(), rows, cols, options);
    const SafetensorsTensorInfo& data = out.info(name);
    const SafetensorsTensorInfo& scale = out.info(name + "_scale");
    EXPECT_EQ(data.dtype, DType::kFloat8E4M3);
    EXPECT_EQ(data.shape, t.shape);
    EXPECT_EQ(scale.dtype, DType::kFloat8E8M0);
    const std::int64_t blocks = (cols + 31) / 32;
    const std::vector<std::int64_t> expected_scale_shape =
        options.layout == Mxfp8ScaleLayout::kRowMajor
            ? std::vector<std::int64_t>{rows, blocks}
            : std::vector<std::int64_t>{(rows + 127) / 128 * 128, (blocks + 3) / 4 * 4};
    EXPECT_EQ(scale.shape, expected_scale_shape);
    EXPECT_EQ(bytes_of(out, name), ref.data);
    EXPECT_EQ(bytes_of(out, name + "_scale"), ref.scale);
  }
}

TEST_F(Mxfp8ConvertTest, DefaultSelectionIsBitExactWithQuantizeMxfp8) {
  const ConvertSummary s = convert_safetensors_to_mxfp8(input(), path("out.safetensors"));
  EXPECT_EQ(s.converted, 3u);
  EXPECT_EQ(std::set<std::string>(s.converted_names.begin(), s.converted_names.end()),
            kDefaultConverted);
  // bias (1-D) is selected by name but not 2-D; step is not a float; norms/embeddings excluded.
  EXPECT_EQ(s.skipped_not_2d, 1u);
  EXPECT_EQ(s.skipped_not_float, 1u);
  EXPECT_EQ(s.copied, tensors_.size() - 3);
  EXPECT_EQ(s.bytes_in, fs::file_size(input()));
  EXPECT_EQ(s.bytes_out, fs::file_size(path("out.safetensors")));
  EXPECT_LT(s.bytes_out, s.bytes_in);

  const SafetensorsFile out = SafetensorsFile::open(path("out.safetensors"));
  EXPECT_EQ(out.tensors().size(), tensors_.size() + 3);
  expect_bit_exact(tensors_, out, kDefaultConverted, {});
}

TEST_F(Mxfp8ConvertTest, FloorRuleAndSwizzledLayoutAreBitExact) {
  Mxfp8ConvertOptions options;
  options.rule = Mxfp8ScaleRule::kFloor;
  options.layout = Mxfp8ScaleLayout::kSwizzled128x4;
  convert_safetensors_to_mxfp8(input(), path("out.safetensors"), options);
  const SafetensorsFile out = SafetensorsFile::open(path("out.safetensors"));
  expect_bit_exact(tensors_, out, kDefaultConverted,
                   {Mxfp8ScaleRule::kFloor, Mxfp8ScaleLayout::kSwizzled128x4});
  EXPECT_EQ(out.metadata().at("shardwise.mxfp8.scale_rule"), "floor");
  EXPECT_EQ(out.metadata().at("shardwise.mxfp8.scale_layout"), "swizzled");
  // fc2 is [130, 40]: 2 blocks per row -> tiles padded to [256, 4].
  EXPECT_EQ(out.info("layers.0.mlp.fc2.weight_scale").shape, (std::vector<std::int64_t>{256, 4}));
}

TEST_F(Mxfp8ConvertTest, MetadataRecordsRuleLayoutAndOriginalTensors) {
  convert_safetensors_to_mxfp8(input(), path("out.safetensors"));
  const SafetensorsFile out = SafetensorsFile::open(path("out.safetensors"));
  const auto& meta = out.metadata();
  EXPECT_EQ(meta.at("format"), "pt");  // input metadata kept
  EXPECT_EQ(meta.at("shardwise.mxfp8.block_size"), "32");
  EXPECT_EQ(meta.at("shardwise.mxfp8.scale_rule"), "ceil");
  EXPECT_EQ(meta.at("shardwise.mxfp8.scale_layout"), "2d");
  // In file order of the input (tensors sorted by offset; the writer puts f32 first).
  EXPECT_EQ(meta.at("shardwise.mxfp8.tensors"),
            "layers.0.mlp.fc1.weight,layers.0.attn.qkv.weight,layers.0.mlp.fc2.weight");
  const auto fc1 = nlohmann::json::parse(meta.at("shardwise.mxfp8.tensor.layers.0.mlp.fc1.weight"));
  EXPECT_EQ(fc1.at("dtype"), "F32");
  EXPECT_EQ(fc1.at("shape"), nlohmann::json::array({33, 80}));
  EXPECT_EQ(fc1.at("blocks_per_row"), 3);
  EXPECT_EQ(fc1.at("last_block_size"), 16);  // 80 = 2 * 32 + 16: partial last block
  const auto qkv =
      nlohmann::json::parse(meta.at("shardwise.mxfp8.tensor.layers.0.attn.qkv.weight"));
  EXPECT_EQ(qkv.at("dtype"), "BF16");
  EXPECT_EQ(qkv.at("last_block_size"), 32);
  const auto fc2 = nlohmann::json::parse(meta.at("shardwise.mxfp8.tensor.layers.0.mlp.fc2.weight"));
  EXPECT_EQ(fc2.at("dtype"), "F16");
  EXPECT_EQ(fc2.at("last_block_size"), 8);  // 40 = 32 + 8
}

// |restored - x| is at most half an E4M3 step at x's binade (2^-4 relative for normals, scale *
// 2^-10 absolute in the subnormal range) plus the bf16 rounding of the result (2^-9 relative).
TEST_F(Mxfp8ConvertTest, RoundTripToBf16IsWithinTheFormatErrorBound) {
  for (const auto layout : {Mxfp8ScaleLayout::kRowMajor, Mxfp8ScaleLayout::kSwizzled128x4}) {
    SCOPED_TRACE(mxfp8_scale_layout_name(layout));
    Mxfp8ConvertOptions options;
    options.layout = layout;
    convert_safetensors_to_mxfp8(input(), path("mx.safetensors"), options);
    const ConvertSummary s =
        convert_safetensors_from_mxfp8(path("mx.safetensors"), path("back.safetensors"));
    EXPECT_EQ(s.converted, 3u);
    EXPECT_EQ(s.copied, tensors_.size() - 3);
    const SafetensorsFile back = SafetensorsFile::open(path("back.safetensors"));
    EXPECT_EQ(back.tensors().size(), tensors_.size());
    EXPECT_EQ(back.metadata(), (std::map<std::string, std::string>{{"format", "pt"}}));
    for (auto& [name, t] : tensors_) {
      SCOPED_TRACE(name);
      const SafetensorsTensorInfo& info = back.info(name);
      EXPECT_EQ(info.shape, t.shape);
      if (!kDefaultConverted.contains(name)) {
        EXPECT_EQ(info.dtype, t.dtype);
        const auto copied = bytes_of(back, name);
        EXPECT_EQ(std::memcmp(copied.data(), t.bytes.data(), copied.size()), 0);
        continue;
      }
      ASSERT_EQ(info.dtype, DType::kBFloat16);
      const std::int64_t rows = t.shape[0], cols = t.shape[1];
      const Mxfp8Tensor q = quantize_mxfp8(t.view(), rows, cols);
      const std::vector<float> deq = dequantize_mxfp8_to_float(q);
      const auto* restored = back.tensor(name).as<std::uint16_t>();
      int exact = 0;
      for (std::int64_t i = 0; i < t.numel(); ++i) {
        const float y = bf16_to_float(restored[i]);
        ASSERT_EQ(restored[i], float_to_bf16(deq[static_cast<std::size_t>(i)])) << i;
        const float x = t.at(i);
        const float scale = e8m0_to_float(
            q.scale[static_cast<std::size_t>((i / cols) * ((cols + 31) / 32) + (i % cols) / 32)]);
        const float bound =
            std::ldexp(std::fabs(x), -4) + std::ldexp(scale, -10) + std::ldexp(std::fabs(y), -9);
        ASSERT_LE(std::fabs(y - x), bound) << "element " << i << ": " << x << " -> " << y;
        exact += (y == x) ? 1 : 0;
      }
      EXPECT_LT(exact, t.numel());  // the check would notice an identity conversion
    }
  }
}

TEST_F(Mxfp8ConvertTest, IncludeAndExcludeFilters) {
  Mxfp8ConvertOptions only_fc1;
  only_fc1.include = {"fc1"};
  EXPECT_EQ(convert_safetensors_to_mxfp8(input(), path("a.safetensors"), only_fc1).converted_names,
            (std::vector<std::string>{"layers.0.mlp.fc1.weight"}));

  // An explicit --include overrides the default exclusion of embeddings.
  Mxfp8ConvertOptions embeddings;
  embeddings.include = {"embed", "^output_layer"};
  const ConvertSummary e = convert_safetensors_to_mxfp8(input(), path("b.safetensors"), embeddings);
  EXPECT_EQ(std::set<std::string>(e.converted_names.begin(), e.converted_names.end()),
            (std::set<std::string>{"embedding.word_embeddings.weight", "output_layer.weight"}));
  expect_bit_exact(tensors_, SafetensorsFile::open(path("b.safetensors")),
                   {"embedding.word_embeddings.weight", "output_layer.weight"}, {});

  Mxfp8ConvertOptions no_qkv;
  no_qkv.exclude = {"qkv"};
  const ConvertSummary q = convert_safetensors_to_mxfp8(input(), path("c.safetensors"), no_qkv);
  EXPECT_EQ(std::set<std::string>(q.converted_names.begin(), q.converted_names.end()),
            (std::set<std::string>{"layers.0.mlp.fc1.weight", "layers.0.mlp.fc2.weight"}));

  // Selected by name but 1-D: copied and counted, never an error.
  Mxfp8ConvertOptions bias;
  bias.include = {"bias$"};
  const ConvertSummary b = convert_safetensors_to_mxfp8(input(), path("d.safetensors"), bias);
  EXPECT_EQ(b.converted, 0u);
  EXPECT_EQ(b.skipped_not_2d, 1u);
  EXPECT_EQ(b.copied, tensors_.size());
  EXPECT_EQ(SafetensorsFile::open(path("d.safetensors")).metadata().at("shardwise.mxfp8.tensors"),
            "");
}

TEST(Mxfp8TensorFilter, DefaultPatternKeepsEmbeddingsOutputAndNormsInHighPrecision) {
  const Mxfp8TensorFilter filter({}, {});
  for (const char* kept :
       {"model.embed_tokens.weight", "transformer.wte.weight", "transformer.wpe.weight",
        "lm_head.weight", "output_layer.weight", "model.norm.weight",
        "layers.3.post_attention_layernorm.weight", "transformer.h.0.ln_1.weight",
        "transformer.ln_f.weight", "ln1.weight"}) {
    EXPECT_FALSE(filter.selects_name(kept)) << kept;
  }
  for (const char* converted :
       {"layers.0.self_attention.linear_qkv.weight", "model.layers.0.mlp.down_proj.weight",
        "transformer.h.0.attn.c_attn.weight", "kiln.weight", "decoder.layers.1.mlp.fc2.weight"}) {
    EXPECT_TRUE(filter.selects_name(converted)) << converted;
  }
  EXPECT_EQ(filter.classify("a.weight", DType::kBFloat16, {4, 64}), Mxfp8Selection::kConvert);
  EXPECT_EQ(filter.classify("a.weight", DType::kBFloat16, {2, 4, 64}), Mxfp8Selection::kNotTwoD);
  EXPECT_EQ(filter.classify("a.weight", DType::kInt32, {4, 64}), Mxfp8Selection::kNotFloat);
  EXPECT_EQ(filter.classify("lm_head.weight", DType::kBFloat16, {4, 64}),
            Mxfp8Selection::kNotSelected);
}

TEST_F(Mxfp8ConvertTest, TensorsLargerThanOneChunkStreamInRowChunks) {
  // 3 rows of 4Mi - 12 elements: the converter's 8Mi-element chunks hold 2 rows, so the tensor
  // takes two chunks (2 rows + 1 row); cols % 32 == 20 also ends each row in a partial block.
  tensors_.clear();
  tensors_["big.weight"] = random_tensor(DType::kBFloat16, {3, (1 << 22) - 12}, 11);
  write_input(input());
  Mxfp8ConvertOptions options;
  options.layout = Mxfp8ScaleLayout::kSwizzled128x4;
  std::vector<std::uint64_t> progress;
  options.progress = [&](std::uint64_t done, std::uint64_t total) {
    EXPECT_EQ(total, tensors_["big.weight"].bytes.size());
    progress.push_back(done);
  };
  convert_safetensors_to_mxfp8(input(), path("out.safetensors"), options);
  expect_bit_exact(tensors_, SafetensorsFile::open(path("out.safetensors")), {"big.weight"},
                   {Mxfp8ScaleRule::kCeil, Mxfp8ScaleLayout::kSwizzled128x4});
  ASSERT_EQ(progress.size(), 2u);
  EXPECT_EQ(progress.back(), tensors_["big.weight"].bytes.size());

  std::uint64_t restore_done = 0, restore_total = 0;
  Mxfp8RestoreOptions restore;
  restore.progress = [&](std::uint64_t done, std::uint64_t total) {
    restore_done = done;
    restore_total = total;
  };
  convert_safetensors_from_mxfp8(path("out.safetensors"), path("back.safetensors"), restore);
  EXPECT_EQ(restore_done, restore_total);
  const SafetensorsFile back = SafetensorsFile::open(path("back.safetensors"));
  SourceTensor& t = tensors_["big.weight"];
  const std::vector<float> deq =
      dequantize_mxfp8_to_float(quantize_mxfp8(t.view(), t.shape[0], t.shape[1]));
  const auto* restored = back.tensor("big.weight").as<std::uint16_t>();
  for (std::size_t i = 0; i < deq.size(); i += 4099) {
    ASSERT_EQ(restored[i], float_to_bf16(deq[i])) << i;
  }
  ASSERT_EQ(restored[deq.size() - 1], float_to_bf16(deq.back()));
}

TEST_F(Mxfp8ConvertTest, BadInputsThrowNamedErrorsAndWriteNothing) {
  EXPECT_THROW(convert_safetensors_to_mxfp8(path("missing.safetensors"), path("o.safetensors")),
               IoError);
  {
    std::ofstream garbage(path("garbage.safetensors"), std::ios::binary);
    garbage << "this is not a safetensors file at all";
  }
  EXPECT_THROW(convert_safetensors_to_mxfp8(path("garbage.safetensors"), path("o.safetensors")),
               FormatError);
  Mxfp8ConvertOptions bad_regex;
  bad_regex.include = {"fc1("};
  try {
    convert_safetensors_to_mxfp8(input(), path("o.safetensors"), bad_regex);
    ADD_FAILURE() << "bad regex accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("fc1("), std::string::npos) << e.what();
  }
  const auto size_before = fs::file_size(input());
  EXPECT_THROW(convert_safetensors_to_mxfp8(input(), input()), InvalidArgument);
  EXPECT_THROW(convert_safetensors_to_mxfp8(input(), dir_ / "." / "in.safetensors"),
               InvalidArgument);
  EXPECT_EQ(fs::file_size(input()), size_before);
  EXPECT_FALSE(fs::exists(path("o.safetensors")));

  // Restoring a file that was never converted, and converting one twice.
  EXPECT_THROW(convert_safetensors_from_mxfp8(input(), path("o.safetensors")), FormatError);
  convert_safetensors_to_mxfp8(input(), path("mx.safetensors"));
  try {
    convert_safetensors_to_mxfp8(path("mx.safetensors"), path("o.safetensors"));
    ADD_FAILURE() << "MXFP8 input converted twice";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("already MXFP8"), std::string::npos) << e.what();
  }
  EXPECT_THROW(convert_safetensors_from_mxfp8(path("mx.safetensors"), path("mx.safetensors")),
               InvalidArgument);
  Mxfp8RestoreOptions to_int;
  to_int.dtype = DType::kInt32;
  EXPECT_THROW(
      convert_safetensors_from_mxfp8(path("mx.safetensors"), path("o.safetensors"), to_int),
      InvalidArgument);
  EXPECT_FALSE(fs::exists(path("o.safetensors")));
}

TEST_F(Mxfp8ConvertTest, ScaleNameCollisionIsRejected) {
  tensors_["layers.0.mlp.fc1.weight_scale"] = random_tensor(DType::kFloat32, {4}, 9);
  write_input(input());
  try {
    convert_safetensors_to_mxfp8(input(), path("o.safetensors"));
    ADD_FAILURE() << "collision accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("fc1.weight_scale"), std::string::npos) << e.what();
  }
}

TEST_F(Mxfp8ConvertTest, InconsistentMxfp8MetadataIsAFormatError) {
  // A pair whose scale tensor is too short for the recorded shape.
  const std::vector<std::uint8_t> data(4 * 64, 0x38), scale(4, 127);
  auto write = [&](const std::string& file, const std::string& shape_json, bool with_scale) {
    SafetensorsWriter w;
    w.add("w", DType::kFloat8E4M3, {4, 64}, data.data());
    if (with_scale) w.add("w_scale", DType::kFloat8E8M0, {4, 1}, scale.data());
    w.set_metadata("shardwise.mxfp8.block_size", "32");
    w.set_metadata("shardwise.mxfp8.scale_rule", "ceil");
    w.set_metadata("shardwise.mxfp8.scale_layout", "2d");
    w.set_metadata("shardwise.mxfp8.tensors", "w");
    w.set_metadata("shardwise.mxfp8.tensor.w", R"({"dtype":"BF16","shape":)" + shape_json + "}");
    w.write_atomic(path(file));
  };
  write("short_scale.safetensors", "[4,64]", true);
  write("no_scale.safetensors", "[4,64]", false);
  write("bad_shape.safetensors", "[4,64,1]", true);
  for (const char* file :
       {"short_scale.safetensors", "no_scale.safetensors", "bad_shape.safetensors"}) {
    SCOPED_TRACE(file);
    EXPECT_THROW(convert_safetensors_from_mxfp8(path(file), path("o.safetensors")), FormatError);
  }
  EXPECT_FALSE(fs::exists(path("o.safetensors")));
}

TEST(Mxfp8ConvertNames, RuleAndLayoutNamesRoundTrip) {
  for (auto rule : {Mxfp8ScaleRule::kCeil, Mxfp8ScaleRule::kFloor}) {
    EXPECT_EQ(parse_mxfp8_scale_rule(mxfp8_scale_rule_name(rule)), rule);
  }
  for (auto layout : {Mxfp8ScaleLayout::kRowMajor, Mxfp8ScaleLayout::kSwizzled128x4}) {
    EXPECT_EQ(parse_mxfp8_scale_layout(mxfp8_scale_layout_name(layout)), layout);
  }
  EXPECT_THROW(parse_mxfp8_scale_rule("round"), InvalidArgument);
  EXPECT_THROW(parse_mxfp8_scale_layout("3d"), InvalidArgument);
}

}  // namespace
}  // namespace shardwise
