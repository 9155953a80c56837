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
  // Storage-only dtypes: the rest of the safetensors format. Files holding them are read, written
  // and copied (convert, reshard); nothing computes with them or sends them over MPI.
  kFloat64,
  kInt8,
  kInt16,
  kUInt16,
  kUInt32,
  kUInt64,
  kBool,
  kFloat8E5M2,
  kFloat8E4M3Fnuz,
  kFloat8E5M2Fnuz,
  kComplex64,
  kFloat4E2M1,  // 4 bits: two elements per byte
  kFloat6E2M3,  // 6 bits: four elements per three bytes
  kFloat6E3M2,
};

// The dtypes shardwise computes with and communicates.
inline constexpr DType kAllDTypes[] = {DType::kFloat32,    DType::kBFloat16,   DType::kFloat16,
                                       DType::kFloat8E4M3, DType::kFloat8E8M0, DType::kUInt8,
                                       DType::kInt32,      DType::kInt64};

// The other dtypes of the safetensors format (kAllDTypes and these are every dtype it has).
inline constexpr DType kStorageOnlyDTypes[] = {
    DType::kFloat64,        DType::kInt8,           DType::kInt16,     DType::kUInt16,
    DType::kUInt32,         DType::kUInt64,         DType::kBool,      DType::kFloat8E5M2,
    DType::kFloat8E4M3Fnuz, DType::kFloat8E5M2Fnuz, DType::kComplex64, DType::kFloat4E2M1,
    DType::kFloat6E2M3,     DType::kFloat6E3M2};

// Bits per element (4 and 6 for the packed sub-byte floats).
std::size_t dtype_bits(DType dtype);

// Bytes per element. InvalidArgument for the sub-byte dtypes (F4, F6_*), whose elements share
// bytes: code that needs an element's bytes cannot handle them.
std::size_t dtype_size(DType dtype);

// Short name used in model specs, configs and CLI output: fp32, bf16, fp16, e4m3, e8m0, uint8,
// int32, int64 (storage-only dtypes: fp64, int8, bool, e5m2, ...).
std::string_view dtype_name(DType dtype);

// Name in the safetensors header: F32, BF16, F16, F8_E4M3, F8_E8M0, U8, I32, I64, F64, BOOL, ...
std::string_view dtype_safetensors_name(DType dtype);

// Parses a short name of a kAllDTypes dtype (also accepts common aliases: float32, float,
// bfloat16, half, fp8, ...); storage-only dtypes have no short name to parse.
std::optional<DType> parse_dtype(std::string_view name);

// Parses a safetensors dtype name: every dtype of the format.
std::optional<DType> parse_safetensors_dtype(std::string_view name);

// Like parse_dtype but throws InvalidArgument naming `what` and the valid names.
DType dtype_from_name(std::string_view name, std::string_view what);

bool is_floating(DType dtype);
// Whether the dtype is one of kStorageOnlyDTypes.
bool is_storage_only(DType dtype);

}  // namespace shardwise
