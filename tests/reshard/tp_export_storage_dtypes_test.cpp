// The offline TP export with the storage-only dtypes of the safetensors format: tensors it does
// not convert are copied (replicated) or sliced (split, whole-byte elements) byte for byte; what
// cannot be done (splitting packed 4-bit elements, converting an F64 tensor to --dtype, MXFP8 of an
// F64 weight) is refused naming the tensor.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "shardwise/core/error.hpp"
#include "shardwise/reshard/tp_export.hpp"

namespace shardwise {
namespace {

std::vector<std::uint8_t> storage_test_bytes(std::size_t n, std::uint8_t first) {
  std::vector<std::uint8_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::uint8_t>(first + i);
  return v;
}

std::string invalid_argument_text(const std::function<void()>& f) {
  try {
    f();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "";
}

TEST(TpExportStorageDtypes, CopiesReplicatedAndSlicesSplitTensorsBytewise) {
  const auto mask = storage_test_bytes(8 * 8, 0);      // BOOL [8, 8], replicated
  const auto freq = storage_test_bytes(16 * 8, 100);   // F64 [16], replicated
  const auto fp4 = storage_test_bytes(6, 7);           // F4 [2, 6]: 12 elements in 6 bytes
  const auto fc1 = storage_test_bytes(4 * 3 * 2, 50);  // I16 [4, 3]: column-parallel, split rows
  const auto fc2 = storage_test_bytes(2 * 4, 200);     // I8 [2, 4]: row-parallel, split columns
  const std::vector<SourceTensor> tensors = {
      {"buffers.mask", DType::kBool, {8, 8}, mask.data()},
      {"buffers.freq", DType::kFloat64, {16}, freq.data()},
      {"buffers.fp4", DType::kFloat4E2M1, {2, 6}, fp4.data()},
      {"layers.0.mlp.fc1.weight", DType::kInt16, {4, 3}, fc1.data()},
      {"layers.0.mlp.fc2.weight", DType::kInt8, {2, 4}, fc2.data()}};
  TpExportOptions options;
  options.tp = 2;
  for (int rank = 0; rank < 2; ++rank) {
    const std::vector<ExportedTensor> out = export_tp_rank(tensors, options, rank);
    ASSERT_EQ(out.size(), tensors.size());
    EXPECT_EQ(out[0].bytes, mask);
    EXPECT_EQ(out[1].bytes, freq);
    EXPECT_EQ(out[2].bytes, fp4);
    EXPECT_EQ(out[2].shape, (std::vector<std::int64_t>{2, 6}));
    for (std::size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i].dtype, tensors[i].dtype);
    // fc1: rows [2r, 2r + 2) of 3 two-byte elements each.
    const std::vector<std::uint8_t> rows(fc1.begin() + rank * 12, fc1.begin() + rank * 12 + 12);
    EXPECT_EQ(out[3].bytes, rows);
    EXPECT_EQ(out[3].shape, (std::vector<std::int64_t>{2, 3}));
    // fc2: columns [2r, 2r + 2) of each of the 2 rows.
    const std::vector<std::uint8_t> cols = {fc2[2 * rank], fc2[2 * rank + 1], fc2[4 + 2 * rank],
                                            fc2[4 + 2 * rank + 1]};
    EXPECT_EQ(out[4].bytes, cols);
  }
  // MXFP8 leaves the non-float 2-D weights alone.
  options.mxfp8 = true;
  const auto mx = export_tp_rank({tensors[0], tensors[4]}, options, 1);
  ASSERT_EQ(mx.size(), 2u);
  EXPECT_EQ(mx[0].dtype, DType::kBool);
  EXPECT_EQ(mx[1].dtype, DType::kInt8);
}

TEST(TpExportStorageDtypes, RefusesWhatItCannotDoNamingTheTensor) {
  const auto bytes = storage_test_bytes(64 * 8, 1);
  TpExportOptions options;
  options.tp = 2;
  // Packed 4-bit elements cannot be split by the column rule ...
  const std::vector<SourceTensor> fp4_weight = {
      {"layers.0.mlp.fc1.weight", DType::kFloat4E2M1, {4, 8}, bytes.data()}};
  std::string message = invalid_argument_text([&] { check_tp_export(fp4_weight, options); });
  EXPECT_NE(message.find("layers.0.mlp.fc1.weight"), std::string::npos) << message;
  EXPECT_NE(message.find("F4"), std::string::npos) << message;
  // ... but are copied whole at tp 1.
  options.tp = 1;
  EXPECT_EQ(export_tp_rank(fp4_weight, options, 0)[0].bytes,
            std::vector<std::uint8_t>(bytes.begin(), bytes.begin() + 16));
  options.tp = 2;
  // A conversion to the export dtype from F64, and MXFP8 of an F64 weight.
  const std::vector<SourceTensor> f64 = {
      {"layers.0.attention.proj.weight", DType::kFloat64, {4, 8}, bytes.data()}};
  EXPECT_NO_THROW(check_tp_export(f64, options));
  options.dtype = DType::kBFloat16;
  message = invalid_argument_text([&] { check_tp_export(f64, options); });
  EXPECT_NE(message.find("layers.0.attention.proj.weight is F64"), std::string::npos) << message;
  options.dtype.reset();
  options.mxfp8 = true;
  message = invalid_argument_text([&] { export_tp_rank(f64, options, 0); });
  EXPECT_NE(message.find("layers.0.attention.proj.weight is F64"), std::string::npos) << message;
  EXPECT_NE(message.find("MXFP8"), std::string::npos) << message;
}

}  // namespace
}  // namespace shardwise
