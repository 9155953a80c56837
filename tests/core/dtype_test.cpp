#include "shardwise/core/dtype.hpp"

#include <gtest/gtest.h>

#include "shardwise/core/error.hpp"

namespace shardwise {
namespace {

TEST(DType, SizesAndNames) {
  EXPECT_EQ(dtype_size(DType::kFloat32), 4u);
  EXPECT_EQ(dtype_size(DType::kBFloat16), 2u);
  EXPECT_EQ(dtype_size(DType::kFloat16), 2u);
  EXPECT_EQ(dtype_size(DType::kFloat8E4M3), 1u);
  EXPECT_EQ(dtype_size(DType::kFloat8E8M0), 1u);
  EXPECT_EQ(dtype_size(DType::kUInt8), 1u);
  EXPECT_EQ(dtype_size(DType::kInt32), 4u);
  EXPECT_EQ(dtype_size(DType::kInt64), 8u);
  EXPECT_EQ(dtype_name(DType::kBFloat16), "bf16");
  EXPECT_EQ(dtype_safetensors_name(DType::kFloat8E4M3), "F8_E4M3");
  EXPECT_EQ(dtype_safetensors_name(DType::kFloat8E8M0), "F8_E8M0");
}

TEST(DType, ParseRoundTripsEveryName) {
  for (DType d : kAllDTypes) {
    EXPECT_EQ(parse_dtype(dtype_name(d)), d);
    EXPECT_EQ(parse_safetensors_dtype(dtype_safetensors_name(d)), d);
  }
  EXPECT_EQ(parse_dtype("bfloat16"), DType::kBFloat16);
  EXPECT_EQ(parse_dtype("float"), DType::kFloat32);
  EXPECT_FALSE(parse_dtype("fp64").has_value());
  EXPECT_FALSE(parse_safetensors_dtype("F128").has_value());
  EXPECT_FALSE(parse_safetensors_dtype("f32").has_value());
}

TEST(DType, UnknownNameErrorNamesTheField) {
  try {
    dtype_from_name("fp7", "param 'w'.dtype");
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("param 'w'.dtype"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("fp7"), std::string::npos);
  }
}

TEST(Error, CheckMacroThrowsInvariantErrorWithMessage) {
  auto fails = [] { SW_CHECK(1 + 1 == 3, "math is ", "broken"); };
  try {
    fails();
    FAIL();
  } catch (const InvariantError& e) {
    EXPECT_NE(std::string(e.what()).find("math is broken"), std::string::npos);
  }
}

}  // namespace
}  // namespace shardwise
