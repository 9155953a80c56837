#include "shardwise/core/dtype.hpp"

#include "shardwise/core/error.hpp"

namespace shardwise {

namespace {

struct DTypeInfo {
  DType dtype;
  std::size_t bits;
  std::string_view name;
  std::string_view safetensors_name;
  bool floating;
  bool storage_only;
};

constexpr DTypeInfo kInfos[] = {
    {DType::kFloat32, 32, "fp32", "F32", true, false},
    {DType::kBFloat16, 16, "bf16", "BF16", true, false},
    {DType::kFloat16, 16, "fp16", "F16", true, false},
    {DType::kFloat8E4M3, 8, "e4m3", "F8_E4M3", true, false},
    {DType::kFloat8E8M0, 8, "e8m0", "F8_E8M0", true, false},
    {DType::kUInt8, 8, "uint8", "U8", false, false},
    {DType::kInt32, 32, "int32", "I32", false, false},
    {DType::kInt64, 64, "int64", "I64", false, false},
    {DType::kFloat64, 64, "fp64", "F64", true, true},
    {DType::kInt8, 8, "int8", "I8", false, true},
    {DType::kInt16, 16, "int16", "I16", false, true},
    {DType::kUInt16, 16, "uint16", "U16", false, true},
    {DType::kUInt32, 32, "uint32", "U32", false, true},
    {DType::kUInt64, 64, "uint64", "U64", false, true},
    {DType::kBool, 8, "bool", "BOOL", false, true},
    {DType::kFloat8E5M2, 8, "e5m2", "F8_E5M2", true, true},
    {DType::kFloat8E4M3Fnuz, 8, "e4m3fnuz", "F8_E4M3FNUZ", true, true},
    {DType::kFloat8E5M2Fnuz, 8, "e5m2fnuz", "F8_E5M2FNUZ", true, true},
    {DType::kComplex64, 64, "complex64", "C64", true, true},
    {DType::kFloat4E2M1, 4, "e2m1", "F4", true, true},
    {DType::kFloat6E2M3, 6, "e2m3", "F6_E2M3", true, true},
    {DType::kFloat6E3M2, 6, "e3m2", "F6_E3M2", true, true},
};

const DTypeInfo& info(DType dtype) {
  for (const auto& i : kInfos) {
    if (i.dtype == dtype) return i;
  }
  throw InvariantError(str_cat("unknown dtype enum value ", static_cast<int>(dtype)));
}

struct Alias {
  std::string_view alias;
  DType dtype;
};

constexpr Alias kAliases[] = {
    {"float32", DType::kFloat32},
    {"float", DType::kFloat32},
    {"f32", DType::kFloat32},
    {"bfloat16", DType::kBFloat16},
    {"float16", DType::kFloat16},
    {"half", DType::kFloat16},
    {"f16", DType::kFloat16},
    {"fp8", DType::kFloat8E4M3},
    {"float8_e4m3fn", DType::kFloat8E4M3},
    {"fp8_e4m3", DType::kFloat8E4M3},
    {"float8_e8m0fnu", DType::kFloat8E8M0},
    {"u8", DType::kUInt8},
    {"i32", DType::kInt32},
    {"i64", DType::kInt64},
};

}  // namespace

std::size_t dtype_bits(DType dtype) { return info(dtype).bits; }

std::size_t dtype_size(DType dtype) {
  const DTypeInfo& i = info(dtype);
  SW_REQUIRE(i.bits % 8 == 0, InvalidArgument, "dtype ", i.safetensors_name, " packs ", i.bits,
             "-bit elements into shared bytes; an element has no byte size of its own");
  return i.bits / 8;
}
std::string_view dtype_name(DType dtype) { return info(dtype).name; }
std::string_view dtype_safetensors_name(DType dtype) { return info(dtype).safetensors_name; }
bool is_floating(DType dtype) { return info(dtype).floating; }
bool is_storage_only(DType dtype) { return info(dtype).storage_only; }

std::optional<DType> parse_dtype(std::string_view name) {
  for (const auto& i : kInfos) {
    if (i.name == name && !i.storage_only) return i.dtype;
  }
  for (const auto& a : kAliases) {
    if (a.alias == name) return a.dtype;
  }
  return std::nullopt;
}

std::optional<DType> parse_safetensors_dtype(std::string_view name) {
  for (const auto& i : kInfos) {
    if (i.safetensors_name == name) return i.dtype;
  }
  return std::nullopt;
}

DType dtype_from_name(std::string_view name, std::string_view what) {
  if (auto d = parse_dtype(name)) return *d;
  std::string valid;
  for (const auto& i : kInfos) {
    if (!i.storage_only) valid += str_cat(valid.empty() ? "" : ", ", i.name);
  }
  throw InvalidArgument(str_cat(what, ": unknown dtype '", name, "' (valid: ", valid, ")"));
}

}  // namespace shardwise
