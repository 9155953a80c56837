// Element types shardwise stores and moves, with their sizes and canonical names.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace shardwise {

enum class DType : std::uint8_t {
  kFloat32,
  kBFloat16,
  kFloat16,
  kFloat8E4M3,  // OCP "E4M3FN": max 448, no infinities, NaN = 0x7F/0xFF
  kFloat8E8M0,  // unsigned power-of-two scale byte: 2^(e-127), 0xFF = NaN
  kUInt8,
  kInt32,
  kInt64,
};

inline constexpr DType kAllDTypes[] = {DType::kFloat32,    DType::kBFloat16,   DType::kFloat16,
                                       DType::kFloat8E4M3, DType::kFloat8E8M0, DType::kUInt8,
                                       DType::kInt32,      DType::kInt64};

// Bytes per element.
std::size_t dtype_size(DType dtype);

// Short name used in model specs, configs and CLI output: fp32, bf16, fp16, e4m3, e8m0, uint8,
// int32, int64.
std::string_view dtype_name(DType dtype);

// Name in the safetensors header: F32, BF16, F16, F8_E4M3, F8_E8M0, U8, I32, I64.
std::string_view dtype_safetensors_name(DType dtype);

// Parses a short name (also accepts common aliases: float32, float, bfloat16, half, fp8, ...).
std::optional<DType> parse_dtype(std::string_view name);

// Parses a safetensors dtype name.
std::optional<DType> parse_safetensors_dtype(std::string_view name);

// Like parse_dtype but throws InvalidArgument naming `what` and the valid names.
DType dtype_from_name(std::string_view name, std::string_view what);

bool is_floating(DType dtype);

}  // namespace shardwise
