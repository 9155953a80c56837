#include "shardwise/checkpoint/safetensors.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "scratch_dir.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise {
namespace {

namespace fs = std::filesystem;

class SafetensorsTest : public test::ScratchDirTest {
 protected:
  static void write_all(const fs::path& path, const std::string& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  static std::string le64(std::uint64_t v) {
    std::string s(8, '\0');
    for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((v >> (8 * i)) & 0xff);
    return s;
  }
  // A file with `header` (padded with spaces to a multiple of 8) and `data_bytes` bytes of data.
  fs::path raw_file(const std::string& header, std::size_t data_bytes) {
    std::string padded = header;
    padded.append((8 - padded.size() % 8) % 8, ' ');
    const fs::path path = dir_ / "raw.safetensors";
    write_all(path, le64(padded.size()) + padded + std::string(data_bytes, '\x11'));
    return path;
  }
  // Opening `path` fails with a FormatError whose message contains every one of `parts`.
  static void expect_format_error(const fs::path& path, const std::vector<std::string>& parts) {
    try {
      SafetensorsFile::open(path);
      ADD_FAILURE() << "expected FormatError for " << path;
    } catch (const FormatError& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find(path.string()), std::string::npos) << message;
      for (const auto& part : parts) {
        EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' not in: " << message;
      }
    }
  }
  void expect_header_error(const std::string& header, std::size_t data_bytes,
                           const std::vector<std::string>& parts) {
    SCOPED_TRACE(header);
    expect_format_error(raw_file(header, data_bytes), parts);
  }
  std::vector<std::string> entries() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir_)) names.push_back(e.path().filename());
    return names;
  }
};

// memcmp that accepts the null pointers of empty buffers.
bool bytes_equal(const void* a, const void* b, std::size_t n) {
  return n == 0 || std::memcmp(a, b, n) == 0;
}

std::vector<std::byte> random_bytes(std::size_t n, std::mt19937_64& rng) {
  std::vector<std::byte> bytes(n);
  for (auto& b : bytes) b = static_cast<std::byte>(rng() & 0xff);
  return bytes;
}

// ---------------------------------------------------------------------------------------------
// Round trips

TEST_F(SafetensorsTest, RoundTripsEveryDtypeWithMetadata) {
  std::mt19937_64 rng(7);
  std::vector<std::vector<std::byte>> payloads;
  SafetensorsWriter writer;
  for (DType dtype : kAllDTypes) {
    payloads.push_back(random_bytes(3 * 5 * dtype_size(dtype), rng));
    writer.add(std::string(dtype_name(dtype)), dtype, {3, 5}, std::span(payloads.back()));
  }
  writer.set_metadata("format", "pt");
  writer.set_metadata("empty", "");
  const fs::path path = dir_ / "all.safetensors";
  writer.write_atomic(path);
  EXPECT_EQ(fs::file_size(path), writer.file_bytes());

  const SafetensorsFile file = SafetensorsFile::open(path);
  EXPECT_EQ(file.file_bytes(), fs::file_size(path));
  ASSERT_EQ(file.tensors().size(), std::size(kAllDTypes));
  const std::map<std::string, std::string> metadata = {{"format", "pt"}, {"empty", ""}};
  EXPECT_EQ(file.metadata(), metadata);
  for (std::size_t i = 0; i < std::size(kAllDTypes); ++i) {
    const DType dtype = kAllDTypes[i];
    const SafetensorsTensorView view = file.tensor(dtype_name(dtype));
    EXPECT_EQ(view.dtype(), dtype);
    EXPECT_EQ(std::vector<std::int64_t>(view.shape().begin(), view.shape().end()),
              (std::vector<std::int64_t>{3, 5}));
    EXPECT_EQ(view.numel(), 15);
    ASSERT_EQ(view.nbytes(), payloads[i].size());
    EXPECT_EQ(std::memcmp(view.data, payloads[i].data(), view.nbytes()), 0) << dtype_name(dtype);
    // The writer's size ordering keeps every tensor naturally aligned in the mapping.
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(view.data) % dtype_size(dtype), 0u);
  }
  const float* f32 = file.tensor("fp32").as<float>();
  float first = 0;
  std::memcpy(&first, payloads[0].data(), 4);
  EXPECT_EQ(std::memcmp(&f32[0], &first, 4), 0);
  EXPECT_THROW(file.tensor("fp32").as<std::int64_t>(), InvariantError);
}

TEST_F(SafetensorsTest, LaysOutByDecreasingElementSizeThenInsertionOrder) {
  const std::vector<std::uint8_t> u8(3, 1);
  const std::vector<std::uint16_t> h(2, 2);
  const std::vector<std::int64_t> q(1, 3);
  const std::vector<float> f(2, 4.0f);
  SafetensorsWriter writer;
  writer.add("z_u8", DType::kUInt8, {3}, u8.data());
  writer.add("y_bf16", DType::kBFloat16, {2}, h.data());
  writer.add("x_f32", DType::kFloat32, {2}, f.data());
  writer.add("w_i64", DType::kInt64, {1}, q.data());
  writer.add("v_f16", DType::kFloat16, {2}, h.data());
  writer.add("u_e4m3", DType::kFloat8E4M3, {3}, u8.data());
  writer.write_atomic(dir_ / "order.safetensors");
  const SafetensorsFile file = SafetensorsFile::open(dir_ / "order.safetensors");
  std::vector<std::string> names;
  std::vector<std::uint64_t> begins;
  for (const auto& t : file.tensors()) {
    names.push_back(t.name);
    begins.push_back(t.data_begin);
  }
  EXPECT_EQ(names,
            (std::vector<std::string>{"w_i64", "x_f32", "y_bf16", "v_f16", "z_u8", "u_e4m3"}));
  EXPECT_EQ(begins, (std::vector<std::uint64_t>{0, 8, 16, 20, 24, 27}));
  EXPECT_EQ(file.data_bytes(), 30u);
}

TEST_F(SafetensorsTest, EmptyTensorsAndScalars) {
  const float scalar = -2.5f;
  const std::int64_t scalar64 = -123456789012345;
  SafetensorsWriter writer;
  writer.add("empty_1d", DType::kFloat32, {0}, nullptr);
  writer.add("scalar", DType::kFloat32, {}, &scalar);
  writer.add("empty_3d", DType::kBFloat16, {4, 0, 3}, nullptr);
  writer.add("scalar_i64", DType::kInt64, {}, &scalar64);
  writer.add("empty_u8", DType::kUInt8, {0}, std::span<const std::byte>());
  writer.write_atomic(dir_ / "edge.safetensors");

  const SafetensorsFile file = SafetensorsFile::open(dir_ / "edge.safetensors");
  EXPECT_EQ(file.data_bytes(), 12u);
  const auto s = file.tensor("scalar");
  EXPECT_TRUE(s.shape().empty());
  EXPECT_EQ(s.numel(), 1);
  EXPECT_EQ(*s.as<float>(), -2.5f);
  EXPECT_EQ(*file.tensor("scalar_i64").as<std::int64_t>(), scalar64);
  const auto e3 = file.tensor("empty_3d");
  EXPECT_EQ(e3.numel(), 0);
  EXPECT_EQ(e3.nbytes(), 0u);
  EXPECT_EQ(std::vector<std::int64_t>(e3.shape().begin(), e3.shape().end()),
            (std::vector<std::int64_t>{4, 0, 3}));
  EXPECT_EQ(file.tensor("empty_1d").numel(), 0);
  EXPECT_EQ(file.info("empty_u8").dtype, DType::kUInt8);
  file.read_range("empty_3d", 0, 0, nullptr);  // nothing to copy, nothing to fail
}

TEST_F(SafetensorsTest, RandomTensorSetsRoundTripAndRangesMatch) {
  std::mt19937_64 rng(2024);
  for (int trial = 0; trial < 25; ++trial) {
    SafetensorsWriter writer;
    std::vector<std::vector<std::byte>> payloads;
    std::vector<std::pair<std::string, DType>> added;
    const int count = static_cast<int>(rng() % 12);
    payloads.reserve(count);
    for (int t = 0; t < count; ++t) {
      const DType dtype = kAllDTypes[rng() % std::size(kAllDTypes)];
      std::vector<std::int64_t> shape(rng() % 4);
      std::int64_t numel = 1;
      for (auto& d : shape) {
        d = static_cast<std::int64_t>(rng() % 9);
        numel *= d;
      }
      payloads.push_back(random_bytes(static_cast<std::size_t>(numel) * dtype_size(dtype), rng));
      const std::string name = str_cat("t", t, "_", dtype_name(dtype));
      writer.add(name, dtype, shape, std::span(payloads.back()));
      added.emplace_back(name, dtype);
    }
    if (rng() % 2) writer.set_metadata("trial", std::to_string(trial));
    const fs::path path = dir_ / "random.safetensors";
    writer.write_atomic(path);
    const SafetensorsFile file = SafetensorsFile::open(path);
    ASSERT_EQ(file.tensors().size(), added.size());
    for (std::size_t t = 0; t < added.size(); ++t) {
      const auto& [name, dtype] = added[t];
      const auto view = file.tensor(name);
      ASSERT_EQ(view.nbytes(), payloads[t].size());
      ASSERT_TRUE(bytes_equal(view.data, payloads[t].data(), view.nbytes()));
      const std::int64_t numel = view.numel();
      const std::int64_t offset = numel == 0 ? 0 : static_cast<std::int64_t>(rng() % numel);
      const std::int64_t n = static_cast<std::int64_t>(rng() % (numel - offset + 1));
      std::vector<std::byte> out(static_cast<std::size_t>(n) * dtype_size(dtype));
      file.read_range(name, offset, n, out.data());
      ASSERT_TRUE(
          bytes_equal(out.data(), payloads[t].data() + offset * dtype_size(dtype), out.size()));
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Byte layout, checked by hand

TEST_F(SafetensorsTest, TinyFileHasHandCheckedBytes) {
  const std::uint8_t a[3] = {1, 2, 3};
  const float b = 1.0f;  // 00 00 80 3F
  SafetensorsWriter writer;
  writer.add("a", DType::kUInt8, {3}, a);
  writer.add("b", DType::kFloat32, {1}, &b);
  writer.write_atomic(dir_ / "tiny.safetensors");

  // "b" (4-byte elements) is laid out before "a". The JSON is 106 bytes, padded with 6 spaces
  // to 112 = 0x70; data starts at 8 + 112 = 120.
  const std::string json = R"({"b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                           R"("a":{"dtype":"U8","shape":[3],"data_offsets":[4,7]}})";
  ASSERT_EQ(json.size(), 106u);
  std::string expected("\x70\0\0\0\0\0\0\0", 8);
  expected += json + "      ";
  expected += std::string("\x00\x00\x80\x3f\x01\x02\x03", 7);
  const std::string bytes = read_all(dir_ / "tiny.safetensors");
  ASSERT_EQ(bytes.size(), 127u);
  EXPECT_EQ(bytes, expected);
  EXPECT_EQ(writer.header(), json + "      ");
}

TEST_F(SafetensorsTest, EmptyAndMetadataOnlyFilesHaveHandCheckedBytes) {
  SafetensorsWriter empty;
  empty.write_atomic(dir_ / "empty.safetensors");
  EXPECT_EQ(read_all(dir_ / "empty.safetensors"), std::string("\x08\0\0\0\0\0\0\0{}      ", 16));
  EXPECT_TRUE(SafetensorsFile::open(dir_ / "empty.safetensors").tensors().empty());

  SafetensorsWriter meta;
  meta.set_metadata("k", "v");
  meta.write_atomic(dir_ / "meta.safetensors");
  // {"__metadata__":{"k":"v"}} is 26 bytes, padded to 32.
  EXPECT_EQ(read_all(dir_ / "meta.safetensors"),
            std::string("\x20\0\0\0\0\0\0\0", 8) + R"({"__metadata__":{"k":"v"}})" + "      ");
  const SafetensorsFile file = SafetensorsFile::open(dir_ / "meta.safetensors");
  EXPECT_EQ(file.metadata().at("k"), "v");
  EXPECT_EQ(file.data_bytes(), 0u);
}

// ---------------------------------------------------------------------------------------------
// Ranged reads

TEST_F(SafetensorsTest, ReadRangeCopiesOnlyTheRequestedElements) {
  std::vector<float> values(1000);
  for (int i = 0; i < 1000; ++i) values[i] = static_cast<float>(i) * 0.25f;
  SafetensorsWriter writer;
  writer.add("w", DType::kFloat32, {10, 100}, values.data());
  writer.write_atomic(dir_ / "w.safetensors");
  const SafetensorsFile file = SafetensorsFile::open(dir_ / "w.safetensors");

  std::vector<float> out(252, -1.0f);
  file.read_range("w", 100, 250, out.data() + 1);
  EXPECT_EQ(out.front(), -1.0f);  // nothing written outside [dst, dst + count)
  EXPECT_EQ(out.back(), -1.0f);
  for (int i = 0; i < 250; ++i) ASSERT_EQ(out[i + 1], static_cast<float>(100 + i) * 0.25f);

  std::vector<float> tail(3);
  file.read_range("w", 997, TensorView{tail.data(), 3, DType::kFloat32});
  EXPECT_EQ(tail, (std::vector<float>{249.25f, 249.5f, 249.75f}));

  EXPECT_THROW(file.read_range("w", 998, 3, out.data()), InvalidArgument);
  EXPECT_THROW(file.read_range("w", -1, 2, out.data()), InvalidArgument);
  EXPECT_THROW(file.read_range("w", 0, -2, out.data()), InvalidArgument);
  try {
    file.read_range("w", 0, TensorView{out.data(), 4, DType::kBFloat16});
    ADD_FAILURE() << "expected ShapeError";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("'w'"), std::string::npos) << e.what();
  }
}

// Large ranges are pread() into the destination rather than copied out of the mapping: the same
// bytes, and a file that shrank after open() is an IoError naming it (touching the mapping past
// the new end of the file would be SIGBUS instead).
TEST_F(SafetensorsTest, LargeRangeReadsMatchAndAShrunkFileIsAnIoError) {
  constexpr int kRows = 64, kCols = 4096;  // 1 MiB of fp32
  std::vector<float> values(static_cast<std::size_t>(kRows) * kCols);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) * 0.5f;
  SafetensorsWriter writer;
  writer.add("small", DType::kFloat32, {3}, values.data());
  writer.add("big", DType::kFloat32, {kRows, kCols}, values.data());
  const fs::path path = dir_ / "big.safetensors";
  writer.write_atomic(path);
  const SafetensorsFile file = SafetensorsFile::open(path);

  const std::int64_t offset = 12345, count = 200000;  // ~800 KB, unaligned start
  std::vector<float> out(static_cast<std::size_t>(count) + 2, -1.0f);
  file.read_range("big", offset, count, out.data() + 1);
  EXPECT_EQ(out.front(), -1.0f);
  EXPECT_EQ(out.back(), -1.0f);
  for (std::int64_t i = 0; i < count; ++i) {
    ASSERT_EQ(out[static_cast<std::size_t>(i) + 1], values[static_cast<std::size_t>(offset + i)]);
  }

  fs::resize_file(path, fs::file_size(path) / 2);  // "big" (after "small") loses its second half
  try {
    file.read_range("big", kRows * kCols - count, count, out.data());
    ADD_FAILURE() << "expected IoError";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("big.safetensors"), std::string::npos) << e.what();
  }
}

TEST_F(SafetensorsTest, MissingTensorErrorNamesTensorAndFile) {
  SafetensorsWriter writer;
  const float x = 1;
  writer.add("present", DType::kFloat32, {1}, &x);
  writer.write_atomic(dir_ / "one.safetensors");
  const SafetensorsFile file = SafetensorsFile::open(dir_ / "one.safetensors");
  EXPECT_TRUE(file.contains("present"));
  EXPECT_FALSE(file.contains("absent"));
  for (int which = 0; which < 3; ++which) {
    try {
      if (which == 0) file.tensor("layers.3.absent");
      if (which == 1) file.info("layers.3.absent");
      if (which == 2) file.read_range("layers.3.absent", 0, 1, nullptr);
      ADD_FAILURE() << "expected FormatError";
    } catch (const FormatError& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find("'layers.3.absent'"), std::string::npos) << message;
      EXPECT_NE(message.find("one.safetensors"), std::string::npos) << message;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Streaming writer

TEST_F(SafetensorsTest, StreamedTensorsAreWrittenChunkByChunk) {
  std::vector<std::int32_t> expected(10'000);
  for (int i = 0; i < 10'000; ++i) expected[i] = i * 3 - 7;
  const std::vector<std::uint8_t> small = {9, 8, 7};
  SafetensorsWriter writer;
  writer.add("small", DType::kUInt8, {3}, small.data());
  int calls = 0;
  writer.add_streamed("big", DType::kInt32, {100, 100}, [&](SafetensorsChunkSink& sink) {
    ++calls;
    EXPECT_EQ(sink.remaining(), 40'000u);
    // Odd chunk sizes that split elements across chunks.
    const auto* bytes = reinterpret_cast<const std::byte*>(expected.data());
    std::size_t done = 0;
    for (std::size_t chunk = 1; done < 40'000; chunk = chunk * 3 + 1) {
      const std::size_t n = std::min<std::size_t>(chunk, 40'000 - done);
      sink.write(bytes + done, n);
      done += n;
    }
    EXPECT_EQ(sink.remaining(), 0u);
  });
  writer.write_atomic(dir_ / "s.safetensors");
  EXPECT_EQ(calls, 1);
  const SafetensorsFile file = SafetensorsFile::open(dir_ / "s.safetensors");
  const std::int32_t* got = file.tensor("big").as<std::int32_t>();
  EXPECT_TRUE(std::equal(expected.begin(), expected.end(), got));
  EXPECT_EQ(std::memcmp(file.tensor("small").data, small.data(), 3), 0);
}

TEST_F(SafetensorsTest, FailedStreamLeavesPreviousFileAndNoTempFiles) {
  const fs::path path = dir_ / "ckpt.safetensors";
  SafetensorsWriter good;
  const float v[2] = {1.5f, 2.5f};
  good.add("v", DType::kFloat32, {2}, v);
  good.write_atomic(path);
  const std::string before = read_all(path);

  const std::vector<std::byte> payload(3 << 20, std::byte{0x5a});
  struct Case {
    const char* what;
    std::function<void(SafetensorsChunkSink&)> producer;
  };
  const std::vector<Case> cases = {
      {"too few", [&](SafetensorsChunkSink& s) { s.write(payload.data(), payload.size() - 1); }},
      {"too many",
       [&](SafetensorsChunkSink& s) {
         s.write(payload.data(), payload.size());
         s.write(payload.data(), 1);
       }},
      {"throws",
       [&](SafetensorsChunkSink& s) {
         s.write(payload.data(), payload.size() / 2);  // part of it already on disk
         throw std::runtime_error("source went away");
       }},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    SafetensorsWriter writer;
    writer.add_streamed("big", DType::kUInt8, {static_cast<std::int64_t>(payload.size())},
                        c.producer);
    if (std::string(c.what) == "throws") {
      EXPECT_THROW(writer.write_atomic(path), std::runtime_error);
    } else {
      try {
        writer.write_atomic(path);
        ADD_FAILURE() << "expected InvalidArgument";
      } catch (const InvalidArgument& e) {
        EXPECT_NE(std::string(e.what()).find("'big'"), std::string::npos) << e.what();
      }
    }
    EXPECT_EQ(read_all(path), before);
    EXPECT_EQ(entries(), std::vector<std::string>{"ckpt.safetensors"});
  }
}

TEST_F(SafetensorsTest, WriterRejectsBadEntries) {
  const float x[4] = {};
  SafetensorsWriter writer;
  writer.add("x", DType::kFloat32, {4}, x);
  EXPECT_THROW(writer.add("x", DType::kFloat32, {4}, x), InvalidArgument);
  EXPECT_THROW(writer.add("__metadata__", DType::kFloat32, {4}, x), InvalidArgument);
  EXPECT_THROW(writer.add("", DType::kFloat32, {4}, x), InvalidArgument);
  EXPECT_THROW(writer.add("neg", DType::kFloat32, {-1, 4}, x), ShapeError);
  EXPECT_THROW(writer.add("null", DType::kFloat32, {4}, nullptr), InvalidArgument);
  EXPECT_THROW(writer.add("short", DType::kFloat32, {4},
                          std::span(reinterpret_cast<const std::byte*>(x), 15)),
               ShapeError);
  EXPECT_THROW(writer.add("view", {2, 3}, TensorView{const_cast<float*>(x), 4, DType::kFloat32}),
               ShapeError);
  EXPECT_THROW(writer.add("huge", DType::kFloat32, {1ll << 40, 1ll << 40}, x), ShapeError);
  EXPECT_EQ(writer.size(), 1u);
  SafetensorsWriter invalid_name;
  invalid_name.add("\xff\xfe", DType::kFloat32, {0}, nullptr);
  EXPECT_THROW(invalid_name.write_atomic(dir_ / "bad.safetensors"), InvalidArgument);
  EXPECT_FALSE(fs::exists(dir_ / "bad.safetensors"));
}

// ---------------------------------------------------------------------------------------------
// Reader validation: one test per kind of damage

TEST_F(SafetensorsTest, TruncatedFiles) {
  write_all(dir_ / "zero", "");
  expect_format_error(dir_ / "zero", {"truncated", "shorter than the 8-byte"});
  write_all(dir_ / "five", "\x08\0\0\0\0");
  expect_format_error(dir_ / "five", {"truncated"});
  // Header length beyond the file.
  write_all(dir_ / "beyond", le64(64) + "{}      ");
  expect_format_error(dir_ / "beyond", {"truncated", "header length 64"});
  // Data shorter than the offsets declare (a file cut in the data area).
  const std::vector<float> v(16, 1.0f);
  SafetensorsWriter writer;
  writer.add("weight", DType::kFloat32, {16}, v.data());
  writer.write_atomic(dir_ / "cut.safetensors");
  fs::resize_file(dir_ / "cut.safetensors", fs::file_size(dir_ / "cut.safetensors") - 5);
  expect_format_error(dir_ / "cut.safetensors", {"'weight'", "truncated"});
}

TEST_F(SafetensorsTest, HeaderLengthAboveLimit) {
  write_all(dir_ / "huge", le64(200'000'000) + "{}      ");
  expect_format_error(dir_ / "huge", {"exceeds the limit"});
}

TEST_F(SafetensorsTest, CorruptedHeaders) {
  expect_header_error("{\"a\": {\"dtype\": ", 0, {"not valid JSON"});
  expect_header_error("{\"a\": tru}", 0, {"not valid JSON"});
  expect_header_error("not json at all", 0, {"must be a JSON object", "found 'n'"});
  expect_header_error("", 0, {"header is empty"});
  expect_header_error("[1, 2]", 0, {"must be a JSON object", "found '['"});
  expect_header_error("\"text\"", 0, {"must be a JSON object"});
  expect_header_error(R"({"t": 5})", 0, {"'t'", "entry must be a JSON object"});
}

TEST_F(SafetensorsTest, MissingFields) {
  expect_header_error(R"({"t": {"shape": [1], "data_offsets": [0, 4]}})", 4,
                      {"'t'", "missing field 'dtype'"});
  expect_header_error(R"({"t": {"dtype": "F32", "data_offsets": [0, 4]}})", 4,
                      {"'t'", "missing field 'shape'"});
  expect_header_error(R"({"t": {"dtype": "F32", "shape": [1]}})", 4,
                      {"'t'", "missing field 'data_offsets'"});
}

TEST_F(SafetensorsTest, WrongFieldTypes) {
  expect_header_error(R"({"t": {"dtype": 5, "shape": [1], "data_offsets": [0, 4]}})", 4,
                      {"'t'", "dtype must be a string"});
  expect_header_error(R"({"t": {"dtype": "F32", "shape": "1", "data_offsets": [0, 4]}})", 4,
                      {"'t'", "shape must be an array"});
  expect_header_error(R"({"t": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})", 4,
                      {"'t'", "shape must hold non-negative integers", "-1"});
  expect_header_error(R"({"t": {"dtype": "F32", "shape": [1.0], "data_offsets": [0, 4]}})", 4,
                      {"'t'", "shape must hold non-negative integers"});
  expect_header_error(R"({"t": {"dtype": "F32", "shape": [1], "data_offsets": [4]}})", 4,
                      {"'t'", "data_offsets must be an array [begin, end]"});
  expect_header_error(R"({"t": {"dtype": "F32", "shape": [1], "data_offsets": {"a": 1}}})", 4,
                      {"'t'", "data_offsets must be an array"});
  expect_header_error(R"({"t": {"dtype": "F32", "shape": [1], "data_offsets": ["0", 4]}})", 4,
                      {"'t'", "data_offsets must hold non-negative integers"});
  expect_header_error(R"({"t": {"dtype": "F32", "shape": [1], "data_offsets": [4, 0]}})", 4,
                      {"'t'", "end before they begin"});
  expect_header_error(
      R"({"t": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4], "extra": 1}})", 4,
      {"'t'", "unexpected field 'extra'"});
  expect_header_error(R"({"t": {"dtype": "F32", "shape": [4294967296, 4294967296, 4294967296],
                                "data_offsets": [0, 4]}})",
                      4, {"'t'", "too many elements"});
}

TEST_F(SafetensorsTest, UnknownDtype) {
  expect_header_error(R"({"t": {"dtype": "F128", "shape": [1], "data_offsets": [0, 16]}})", 16,
                      {"'t'", "unknown dtype 'F128'", "BF16", "F64", "BOOL"});
  expect_header_error(R"({"t": {"dtype": "f32", "shape": [1], "data_offsets": [0, 4]}})", 4,
                      {"'t'", "unknown dtype 'f32'"});
}

TEST_F(SafetensorsTest, ShapeDoesNotMatchOffsets) {
  expect_header_error(R"({"t": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}})", 4,
                      {"'t'", "span 4 bytes", "needs 8"});
  expect_header_error(R"({"t": {"dtype": "BF16", "shape": [2, 0], "data_offsets": [0, 4]}})", 4,
                      {"'t'", "needs 0"});
}

TEST_F(SafetensorsTest, OverlappingTensors) {
  expect_header_error(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                          "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
                      12, {"'b'", "overlap", "'a'"});
  // Same range twice.
  expect_header_error(R"({"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]},
                          "b": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]}})",
                      4, {"overlap"});
  // An empty tensor placed inside another one.
  expect_header_error(R"({"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]},
                          "e": {"dtype": "U8", "shape": [0], "data_offsets": [2, 2]}})",
                      4, {"'e'", "overlap"});
}

TEST_F(SafetensorsTest, GapsBetweenTensors) {
  expect_header_error(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                          "b": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]}})",
                      12, {"'b'", "gap of 4", "'a'"});
  expect_header_error(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})", 8,
                      {"'a'", "gap of 4", "start of the data area"});
}

TEST_F(SafetensorsTest, TrailingBytes) {
  expect_header_error(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})", 6,
                      {"2 trailing bytes"});
  expect_header_error("{}", 3, {"3 trailing bytes"});
}

TEST_F(SafetensorsTest, DuplicateKeys) {
  expect_header_error(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                          "a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})",
                      8, {"'a' more than once"});
  expect_header_error(
      R"({"a": {"dtype": "F32", "dtype": "I32", "shape": [1], "data_offsets": [0, 4]}})", 4,
      {"'dtype' more than once"});
  expect_header_error(R"({"__metadata__": {"k": "1", "k": "2"}})", 0, {"'k' more than once"});
}

TEST_F(SafetensorsTest, BadMetadata) {
  expect_header_error(R"({"__metadata__": {"step": 42}})", 0,
                      {"__metadata__ value of 'step' must be a string", "42"});
  expect_header_error(R"({"__metadata__": {"nested": {"a": "b"}}})", 0,
                      {"'nested' must be a string"});
  expect_header_error(R"({"__metadata__": ["a"]})", 0, {"__metadata__ must be an object"});
}

TEST_F(SafetensorsTest, AcceptsFilesFromOtherWriters) {
  // Pretty-printed, tensors not in offset order, metadata last, header length not a multiple
  // of 8 (so the F32 tensor is not 4-byte aligned in the mapping).
  const std::string header = R"({
    "second": {"dtype": "F32", "shape": [1], "data_offsets": [1, 5]},
    "first": {"dtype": "U8", "shape": [], "data_offsets": [0, 1]},
    "__metadata__": {"source": "elsewhere"}
  }  )";
  const float value = 6.5f;
  std::string data(5, '\0');
  data[0] = '\x2a';
  std::memcpy(data.data() + 1, &value, 4);
  std::string h = header;
  while ((8 + h.size() + 1) % 4 == 0) h += ' ';
  ASSERT_NE((8 + h.size() + 1) % 4, 0u);
  write_all(dir_ / "foreign.safetensors", le64(h.size()) + h + data);

  const SafetensorsFile file = SafetensorsFile::open(dir_ / "foreign.safetensors");
  ASSERT_EQ(file.tensors().size(), 2u);
  EXPECT_EQ(file.tensors()[0].name, "first");  // sorted by offset
  EXPECT_EQ(file.metadata().at("source"), "elsewhere");
  float got = 0;
  file.read_range("second", 0, 1, &got);
  EXPECT_EQ(got, 6.5f);
  EXPECT_THROW(file.tensor("second").as<float>(), InvariantError);  // unaligned
  EXPECT_EQ(*file.tensor("first").as<std::uint8_t>(), 0x2a);
}

TEST_F(SafetensorsTest, OpenErrorsNameThePath) {
  try {
    SafetensorsFile::open(dir_ / "does_not_exist.safetensors");
    ADD_FAILURE() << "expected IoError";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("does_not_exist.safetensors"), std::string::npos);
  }
  EXPECT_THROW(SafetensorsFile::open(dir_), IoError);
}

TEST_F(SafetensorsTest, MovedFileKeepsItsViews) {
  const std::vector<std::int64_t> v = {1, 2, 3};
  SafetensorsWriter writer;
  writer.add("v", DType::kInt64, {3}, v.data());
  writer.write_atomic(dir_ / "m.safetensors");
  SafetensorsFile a = SafetensorsFile::open(dir_ / "m.safetensors");
  const auto view = a.tensor("v");
  SafetensorsFile b = std::move(a);
  EXPECT_EQ(view.as<std::int64_t>()[2], 3);  // the mapping moved with the object
  EXPECT_EQ(b.tensor("v").data, view.data);
  EXPECT_EQ(view.info, &b.info("v"));
}

}  // namespace
}  // namespace shardwise
