// Fault suite for untrusted safetensors files: each test generates the hostile input it needs
// (deep nesting, huge names, NUL and BOM framing, control characters, empty tensors with huge
// dimensions, very many tensors) and checks for a clean FormatError or a correct result. Every
// case here crashed, hung or was silently accepted before the reader was hardened.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "scratch_dir.hpp"
#include "shardwise/checkpoint/mxfp8_convert.hpp"
#include "shardwise/checkpoint/safetensors.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/core/message_text.hpp"

namespace shardwise {
namespace {

namespace fs = std::filesystem;
using namespace std::string_literals;

// Runs fn on a thread and fails the test if it has not returned after `seconds`. A hung call
// cannot be cancelled, so the process then exits (a spin used to be the failure mode here).
template <typename Fn>
void finishes_within(int seconds, const char* what, Fn&& fn) {
  std::packaged_task<void()> task(std::forward<Fn>(fn));
  auto done = task.get_future();
  std::thread worker(std::move(task));
  if (done.wait_for(std::chrono::seconds(seconds)) == std::future_status::timeout) {
    std::fprintf(stderr, "FAILED: %s did not finish within %d s (hang)\n", what, seconds);
    std::fflush(stderr);
    std::_Exit(1);
  }
  worker.join();
  done.get();  // rethrows what fn threw
}

// No raw control character (C0, DEL) may reach a terminal through a message.
void expect_no_control_characters(const std::string& message) {
  for (unsigned char c : message) {
    ASSERT_FALSE(c < 0x20 || c == 0x7f) << "raw control byte " << int{c} << " in: " << message;
  }
}

class SafetensorsFaultTest : public test::ScratchDirTest {
 protected:
  static std::string le64(std::uint64_t v) {
    std::string s(8, '\0');
    for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((v >> (8 * i)) & 0xff);
    return s;
  }
  // A file holding exactly `header` (no padding added) and `data_bytes` bytes of data.
  fs::path file_with_header(const std::string& header, std::size_t data_bytes = 0) {
    const fs::path file = dir_ / "fault.safetensors";
    write_all(file, le64(header.size()) + header + std::string(data_bytes, '\x01'));
    return file;
  }
  // The FormatError message of opening a file with this header; fails if it opens.
  std::string open_error(const std::string& header, std::size_t data_bytes = 0) {
    const fs::path file = file_with_header(header, data_bytes);
    try {
      SafetensorsFile::open(file);
    } catch (const FormatError& e) {
      return e.what();
    }
    ADD_FAILURE() << "header accepted: " << header.substr(0, 200);
    return "";
  }
  static std::string nested(std::size_t depth) {
    return std::string(depth, '[') + std::string(depth, ']');
  }
  static std::string nested_objects(std::size_t depth) {
    std::string text;
    for (std::size_t i = 0; i < depth; ++i) text += "{\"a\":";
    return text + "1" + std::string(depth, '}');
  }
};

constexpr const char* kOneTensor = R"("t":{"dtype":"U8","shape":[1],"data_offsets":[0,1]})";

TEST_F(SafetensorsFaultTest, DeeplyNestedJsonIsRefusedAtTheDepthLimit) {
  // ~65k levels crashed the error path that printed the value back (stack overflow).
  const std::size_t depth = 100'000;
  for (const std::string& header :
       {R"({"__metadata__":{"k":)" + nested(depth) + "}}",
        R"({"t":{"dtype":"U8","shape":)" + nested(depth) + R"(,"data_offsets":[0,1]}})",
        R"({"t":{"dtype":"U8","shape":[1],"data_offsets":)" + nested(depth) + "}}",
        nested_objects(depth)}) {
    const std::string message = open_error(header, 1);
    EXPECT_NE(message.find("nests JSON deeper than 3 levels"), std::string::npos) << message;
    EXPECT_LT(message.size(), 400u) << message;
  }
  // One level too deep is refused too; the deepest legal shape is not.
  EXPECT_NE(open_error(R"({"t":{"dtype":"U8","shape":[[1]],"data_offsets":[0,1]}})", 1)
                .find("deeper than 3"),
            std::string::npos);
  EXPECT_NO_THROW(SafetensorsFile::open(file_with_header("{"s + kOneTensor + "}", 1)));
}

TEST_F(SafetensorsFaultTest, LongValuesAreTruncatedInMessages) {
  const std::string long_string(1'000'000, 'x');
  const std::string message = open_error(R"({"__metadata__":{"k":[")" + long_string + R"("]}})");
  EXPECT_NE(message.find("must be a string"), std::string::npos) << message.substr(0, 300);
  EXPECT_NE(message.find("...("), std::string::npos) << message.substr(0, 300);
  EXPECT_LT(message.size(), 400u);
  std::string offsets = "[0";
  for (int i = 0; i < 100'000; ++i) offsets += ",1";
  EXPECT_LT(
      open_error(R"({"t":{"dtype":"U8","shape":[1],"data_offsets":)" + offsets + "]}}", 1).size(),
      400u);
}

TEST_F(SafetensorsFaultTest, TensorNamesOver64KiBAreRefused) {
  const std::string long_name(kSafetensorsMaxNameBytes + 1, 'n');
  const std::string message =
      open_error("{\"" + long_name + R"(":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", 1);
  EXPECT_NE(message.find("tensor name of 65537 bytes exceeds the limit of 65536"),
            std::string::npos)
      << message.substr(0, 300);
  EXPECT_LT(message.size(), 400u);
  // The limit itself is fine, and the writer refuses what the reader would.
  const std::string at_limit(kSafetensorsMaxNameBytes, 'm');
  const fs::path ok = file_with_header(
      "{\"" + at_limit + R"(":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", 1);
  EXPECT_TRUE(SafetensorsFile::open(ok).contains(at_limit));
  SafetensorsWriter writer;
  EXPECT_THROW(writer.add(long_name, DType::kUInt8, {0}, nullptr), InvalidArgument);
}

TEST_F(SafetensorsFaultTest, NulBomAndOtherPaddingAreRefused) {
  const std::string valid = "{"s + kOneTensor + "}";
  // Bytes after a NUL were ignored (a second header could hide there).
  EXPECT_NE(open_error(valid + "\0{\"hidden\":1}"s, 1)
                .find("NUL byte at offset " + std::to_string(valid.size())),
            std::string::npos);
  EXPECT_NE(open_error(valid + "\0\0\0"s, 1).find("NUL byte"), std::string::npos);
  EXPECT_NE(open_error("\xEF\xBB\xBF" + valid, 1).find("byte-order mark"), std::string::npos);
  EXPECT_NE(open_error(" " + valid, 1).find("starting with '{'"), std::string::npos);
  EXPECT_NE(open_error(valid + "\n", 1).find("padded with '\\n'"), std::string::npos);
  EXPECT_NE(open_error(valid + "\t  ", 1).find("padded with '\\t'"), std::string::npos);
  EXPECT_NE(open_error(valid + "  x", 1).find("not valid JSON"), std::string::npos);
  // Trailing spaces are the format's padding.
  EXPECT_NO_THROW(SafetensorsFile::open(file_with_header(valid + "       ", 1)));
}

TEST_F(SafetensorsFaultTest, ControlCharactersInNamesAreEscapedInMessages) {
  const std::string evil = "w\\n\n\x1b[2J\x1b[H\r\x07\xc2\x9b";  // newline, ANSI clear, C1 CSI
  std::string json_name;  // the same name as a JSON string body
  for (unsigned char c : evil) {
    char escaped[8];
    if (c < 0x20) {
      std::snprintf(escaped, sizeof(escaped), "\\u%04x", c);
      json_name += escaped;
    } else if (c == '\\') {
      json_name += "\\\\";
    } else {
      json_name += static_cast<char>(c);
    }
  }
  const std::string message =
      open_error("{\"" + json_name + R"(":{"dtype":"XX","shape":[1],"data_offsets":[0,1]}})", 1);
  expect_no_control_characters(message);
  EXPECT_NE(message.find("'w\\\\n\\n\\x1b[2J\\x1b[H\\r\\x07\\u009b'"), std::string::npos)
      << message;
  // The lookup error of the mapped file escapes the name too.
  SafetensorsWriter writer;
  writer.add("ok", DType::kUInt8, {0}, nullptr);
  writer.write_atomic(dir_ / "ok.safetensors");
  const SafetensorsFile file = SafetensorsFile::open(dir_ / "ok.safetensors");
  expect_no_control_characters(test::error_message_of([&] { file.info(evil); }));
}

TEST_F(SafetensorsFaultTest, ShapesWhoseProductOverflowsAreRefusedEvenWhenEmpty) {
  const std::string message =
      open_error(R"({"t":{"dtype":"F32","shape":[4611686018427387904,4,0],"data_offsets":[0,0]}})");
  EXPECT_NE(message.find("too many elements"), std::string::npos) << message;
  SafetensorsWriter writer;
  EXPECT_THROW(writer.add("t", DType::kFloat32, {std::int64_t{1} << 62, 4, 0}, nullptr),
               ShapeError);
}

// An empty 2-D tensor with a huge dimension: reading it is fine, converting it must not loop
// over its 2^62 (empty) rows. This spun forever before.
TEST_F(SafetensorsFaultTest, EmptyTensorWithHugeDimensionConvertsAtOnce) {
  const std::int64_t huge = std::int64_t{1} << 62;
  for (const std::vector<std::int64_t>& shape :
       {std::vector<std::int64_t>{huge, 0}, std::vector<std::int64_t>{0, huge}}) {
    SafetensorsWriter writer;
    writer.add("layers.0.mlp.fc1.weight", DType::kBFloat16, shape, nullptr);
    writer.write_atomic(dir_ / "in.safetensors");
    for (const Mxfp8ScaleLayout layout :
         {Mxfp8ScaleLayout::kRowMajor, Mxfp8ScaleLayout::kSwizzled128x4}) {
      Mxfp8ConvertOptions options;
      options.layout = layout;
      ConvertSummary summary;
      finishes_within(20, "convert of an empty [2^62, 0] tensor", [&] {
        summary = convert_safetensors_to_mxfp8(dir_ / "in.safetensors", dir_ / "out.safetensors",
                                               options);
      });
      EXPECT_EQ(summary.converted, 1u);
      const SafetensorsFile out = SafetensorsFile::open(dir_ / "out.safetensors");
      EXPECT_EQ(out.info("layers.0.mlp.fc1.weight").shape, shape);
      EXPECT_EQ(out.info("layers.0.mlp.fc1.weight_scale").numel(), 0);
      finishes_within(20, "restore of an empty [2^62, 0] tensor", [&] {
        convert_safetensors_from_mxfp8(dir_ / "out.safetensors", dir_ / "back.safetensors");
      });
      EXPECT_EQ(
          SafetensorsFile::open(dir_ / "back.safetensors").info("layers.0.mlp.fc1.weight").shape,
          shape);
    }
  }
  // Past 2^62 the MXFP8 scale geometry would overflow: refused with a message, not UB.
  SafetensorsWriter writer;
  writer.add("layers.0.mlp.fc1.weight", DType::kBFloat16,
             {std::numeric_limits<std::int64_t>::max(), 0}, nullptr);
  writer.write_atomic(dir_ / "max.safetensors");
  EXPECT_THROW(convert_safetensors_to_mxfp8(dir_ / "max.safetensors", dir_ / "o.safetensors"),
               InvalidArgument);
}

// The unoptimised sanitizer build (about 40x slower on this path) checks the same code on fewer
// tensors; the release build checks 200k.
#if defined(__SANITIZE_ADDRESS__) || !defined(NDEBUG)
constexpr int kManyTensors = 5'000;
#else
constexpr int kManyTensors = 200'000;
#endif

// Writer duplicate checks and the reader's JSON objects were quadratic in the tensor count
// (40k tensors took 40 s); 200k must take seconds, in both directions and through convert.
TEST_F(SafetensorsFaultTest, ManyTensorsWriteReadAndConvertInLinearTime) {
  const int count = kManyTensors;
  std::vector<std::uint8_t> values(count);
  for (int i = 0; i < count; ++i) values[i] = static_cast<std::uint8_t>(i * 7);
  finishes_within(180, "many-tensor write, read and convert", [&] {
    SafetensorsWriter writer;
    for (int i = 0; i < count; ++i) {
      writer.add("layers." + std::to_string(i) + ".norm.weight", DType::kUInt8, {1}, &values[i]);
    }
    EXPECT_THROW(writer.add("layers.7.norm.weight", DType::kUInt8, {1}, &values[0]),
                 InvalidArgument);
    writer.write_atomic(dir_ / "many.safetensors");
    const SafetensorsFile file = SafetensorsFile::open(dir_ / "many.safetensors");
    ASSERT_EQ(file.tensors().size(), static_cast<std::size_t>(count));
    const int middle = count / 2 + 1;
    EXPECT_EQ(file.tensor(str_cat("layers.", middle, ".norm.weight")).as<std::uint8_t>()[0],
              static_cast<std::uint8_t>(middle * 7));
    const ConvertSummary summary =
        convert_safetensors_to_mxfp8(dir_ / "many.safetensors", dir_ / "copy.safetensors");
    EXPECT_EQ(summary.copied, static_cast<std::size_t>(count));
    const SafetensorsFile copy = SafetensorsFile::open(dir_ / "copy.safetensors");
    EXPECT_EQ(copy.tensors().size(), static_cast<std::size_t>(count));
    const int last = count - 1;
    EXPECT_EQ(copy.tensor(str_cat("layers.", last, ".norm.weight")).as<std::uint8_t>()[0],
              static_cast<std::uint8_t>(last * 7));
  });
}

// std::regex recursed once per character: '.*' on a 1,000,000-character name (or '(.)*' on
// 13,800) overflowed the stack. The filter must handle any name the reader can hand it.
TEST(Mxfp8TensorFilterFault, LongNamesDoNotOverflowTheStack) {
  const std::string name(1'000'000, 'a');
  EXPECT_TRUE(Mxfp8TensorFilter({".*"}, {}).selects_name(name));
  EXPECT_TRUE(Mxfp8TensorFilter({"(.)*"}, {}).selects_name(name));
  EXPECT_FALSE(Mxfp8TensorFilter({"(a|aa)*b"}, {}).selects_name(name));
  EXPECT_FALSE(Mxfp8TensorFilter({}, {"(.)*"}).selects_name(name));
}

TEST(Mxfp8TensorFilterFault, InvalidPatternsNameThePattern) {
  for (const std::string& bad : {"fc1("s, "(a)\\1"s, "[z-a]"s, "a{2,1}"s}) {
    const std::string message = test::error_message_of([&] { Mxfp8TensorFilter({bad}, {}); });
    EXPECT_NE(message.find("invalid --include regular expression"), std::string::npos) << message;
    EXPECT_NE(message.find(printable(bad)), std::string::npos) << message;
  }
  const std::string message =
      test::error_message_of([&] { Mxfp8TensorFilter({}, {"x\n\x1b[2J("}); });
  expect_no_control_characters(message);
  EXPECT_NE(message.find("--exclude"), std::string::npos) << message;
}

}  // namespace
}  // namespace shardwise
