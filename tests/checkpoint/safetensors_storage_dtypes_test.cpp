// The dtypes of the safetensors format that shardwise only stores (F64, I8, I16, U16, U32, U64,
// BOOL, F8_E5M2, the FNUZ FP8s, C64 and the packed F4 / F6): names, bit widths, a file round trip
// of every one byte for byte, and the rule that packed elements fill whole bytes (reader and
// writer alike).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "scratch_dir.hpp"
#include "shardwise/checkpoint/safetensors.hpp"
#include "shardwise/core/dtype.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise {
namespace {

class StorageDtypesTest : public test::ScratchDirTest {};

TEST(StorageDtypes, NamesAndBitsFollowTheFormat) {
  const std::vector<std::pair<const char*, std::size_t>> expected = {
      {"F64", 64}, {"I8", 8},   {"I16", 16},    {"U16", 16},        {"U32", 32},
      {"U64", 64}, {"BOOL", 8}, {"F8_E5M2", 8}, {"F8_E4M3FNUZ", 8}, {"F8_E5M2FNUZ", 8},
      {"C64", 64}, {"F4", 4},   {"F6_E2M3", 6}, {"F6_E3M2", 6}};
  ASSERT_EQ(std::size(kStorageOnlyDTypes), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const DType d = kStorageOnlyDTypes[i];
    EXPECT_EQ(dtype_safetensors_name(d), expected[i].first);
    EXPECT_EQ(dtype_bits(d), expected[i].second) << expected[i].first;
    EXPECT_EQ(parse_safetensors_dtype(expected[i].first), d);
    EXPECT_TRUE(is_storage_only(d));
    // No short name parses to a storage-only dtype: configs and specs keep their dtypes.
    EXPECT_FALSE(parse_dtype(dtype_name(d)).has_value()) << dtype_name(d);
  }
  for (DType d : kAllDTypes) {
    EXPECT_FALSE(is_storage_only(d));
    EXPECT_EQ(dtype_bits(d), 8 * dtype_size(d));
  }
  EXPECT_EQ(dtype_size(DType::kFloat64), 8u);
  EXPECT_EQ(dtype_size(DType::kBool), 1u);
  EXPECT_THROW(dtype_size(DType::kFloat4E2M1), InvalidArgument);
  EXPECT_FALSE(parse_safetensors_dtype("F128").has_value());
}

TEST_F(StorageDtypesTest, EveryDtypeRoundTripsByteForByte) {
  std::mt19937_64 rng(11);
  std::vector<std::vector<std::byte>> payloads;
  std::vector<DType> dtypes(std::begin(kAllDTypes), std::end(kAllDTypes));
  dtypes.insert(dtypes.end(), std::begin(kStorageOnlyDTypes), std::end(kStorageOnlyDTypes));
  SafetensorsWriter writer;
  for (DType d : dtypes) {
    // 4 x 6 elements fill whole bytes at 4 and 6 bits too.
    std::vector<std::byte> bytes(4 * 6 * dtype_bits(d) / 8);
    for (auto& b : bytes) b = static_cast<std::byte>(rng() & 0xff);
    payloads.push_back(std::move(bytes));
    writer.add(std::string(dtype_safetensors_name(d)), d, {4, 6},
               static_cast<const void*>(payloads.back().data()));
  }
  writer.write_atomic(dir_ / "all.safetensors");
  const SafetensorsFile file = SafetensorsFile::open(dir_ / "all.safetensors");
  ASSERT_EQ(file.tensors().size(), dtypes.size());
  for (std::size_t i = 0; i < dtypes.size(); ++i) {
    const std::string name(dtype_safetensors_name(dtypes[i]));
    const SafetensorsTensorView view = file.tensor(name);
    EXPECT_EQ(view.dtype(), dtypes[i]) << name;
    EXPECT_EQ(view.numel(), 24) << name;
    ASSERT_EQ(view.nbytes(), payloads[i].size()) << name;
    EXPECT_EQ(std::memcmp(view.data, payloads[i].data(), view.nbytes()), 0) << name;
  }
}

TEST_F(StorageDtypesTest, PackedElementsMustFillWholeBytes) {
  // Reader: 3 F4 elements are 12 bits.
  const std::string header = R"({"t":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}})";
  std::string padded = header + std::string((8 - header.size() % 8) % 8, ' ');
  std::string blob(8, '\0');
  const std::uint64_t n = padded.size();
  std::memcpy(blob.data(), &n, 8);
  write_all(dir_ / "f4.safetensors", blob + padded + std::string(2, '\0'));
  try {
    SafetensorsFile::open(dir_ / "f4.safetensors");
    FAIL() << "no error";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("do not fill whole bytes"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'t'"), std::string::npos) << e.what();
  }
  // Writer: 5 F6 elements are 30 bits; 4 are 3 bytes.
  SafetensorsWriter writer;
  const std::vector<std::byte> bytes(4);
  EXPECT_THROW(writer.add("f6", DType::kFloat6E2M3, {5}, static_cast<const void*>(bytes.data())),
               ShapeError);
  EXPECT_NO_THROW(
      writer.add("f6", DType::kFloat6E2M3, {4}, std::span<const std::byte>(bytes.data(), 3)));
}

}  // namespace
}  // namespace shardwise
