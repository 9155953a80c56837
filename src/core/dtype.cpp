#include "shardwise/core/dtype.hpp"

#include "shardwise/core/error.hpp"

namespace shardwise {

namespace {

struct DTypeInfo {
  DType dtype;
  std::size_t size;
  std::string_view name;
  std::string_view safetensors_name;
  bool floating;
};

constexpr DTypeInfo kInfos[] = {
    {DType::kFloat32, 4, "fp32", "F32", true},
    {DType::kBFloat16, 2, "bf16", "BF16", true},
    {DType::kFloat16, 2, "fp16", "F16", true},
    {DType::kFloat8E4M3, 1, "e4m3", "F8_E4M3", true},
    {DType::kFloat8E8M0, 1, "e8m0", "F8_E8M0", true},
    {DType::kUInt8, 1, "uint8", "U8", false},
    {DType::kInt32, 4, "int32", "I32", false},
    {DType::kInt64, 8, "int64", "I64", false},
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
    {"float32", DType::kFloat32},     {"float", DType::kFloat32},
    {"f32", DType::kFloat32},         {"bfloat16", DType::kBFloat16},
    {"float16", DType::kFloat16},     {"half", DType::kFloat16},
    {"f16", DType::kFloat16},         {"fp8", DType::kFloat8E4M3},
    {"float8_e4m3fn", DType::kFloat8E4M3}, {"fp8_e4m3", DType::kFloat8E4M3},
    {"float8_e8m0fnu", DType::kFloat8E8M0}, {"u8", DType::kUInt8},
    {"i32", DType::kInt32},           {"i64", DType::kInt64},
};

}  // namespace

std::size_t dtype_size(DType dtype) { return info(dtype).size; }
std::string_view dtype_name(DType dtype) { return info(dtype).name; }
std::string_view dtype_safetensors_name(DType dtype) { return info(dtype).safetensors_name; }
bool is_floating(DType dtype) { return info(dtype).floating; }

std::optional<DType> parse_dtype(std::string_view name) {
  for (const auto& i : kInfos) {
    if (i.name == name) return i.dtype;
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
  for (const auto& i : kInfos) valid += str_cat(valid.empty() ? "" : ", ", i.name);
  throw InvalidArgument(str_cat(what, ": unknown dtype '", name, "' (valid: ", valid, ")"));
}

}  // namespace shardwise
