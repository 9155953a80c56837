// Deterministic per-rank test data for collective tests, and references computed on one rank.
// Every rank can generate every rank's input from (seed, rank, index), so each rank computes the
// expected result of a collective locally and compares bit for bit.
//
// Float values are k * 2^-e with small k and e, chosen so that the fp32 sum over up to 8 ranks is
// exact: the fp32 reference is then independent of summation order, and bf16/fp16 results must
// equal it rounded once.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "shardwise/comm/process_group.hpp"
#include "shardwise/core/float_convert.hpp"

namespace shardwise::testing_comm {

inline std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

inline std::uint64_t draw(std::uint64_t seed, int rank, std::int64_t index) {
  return mix(mix(seed * 1000003ull + static_cast<std::uint64_t>(rank)) ^
             static_cast<std::uint64_t>(index));
}

// The value rank `rank` holds at `index`, as a double (exactly representable in `dtype`).
inline double value_at(DType dtype, std::uint64_t seed, int rank, std::int64_t index) {
  const std::uint64_t r = draw(seed, rank, index);
  const int e = static_cast<int>((r >> 40) % 9);
  auto signed_k = [&](std::int64_t bound) {
    return static_cast<double>(
        static_cast<std::int64_t>(r % static_cast<std::uint64_t>(2 * bound + 1)) - bound);
  };
  switch (dtype) {
    case DType::kFloat32:
      return signed_k(4095) / static_cast<double>(1 << e);
    case DType::kBFloat16:
      return signed_k(255) / static_cast<double>(1 << e);
    case DType::kFloat16:
      return signed_k(2047) / static_cast<double>(1 << e);
    case DType::kInt32:
      return signed_k(1000000);
    case DType::kInt64:
      return signed_k(1000000) * 8589934592.0 + static_cast<double>(e);
    default:
      return static_cast<double>(r & 0xffu);  // byte types: any bit pattern
  }
}

// Stores v (exactly representable) as element i of dtype at dst.
inline void store(DType dtype, void* dst, std::int64_t i, double v) {
  auto* b = static_cast<std::byte*>(dst) + static_cast<std::size_t>(i) * dtype_size(dtype);
  switch (dtype) {
    case DType::kFloat32: {
      const float f = static_cast<float>(v);
      std::memcpy(b, &f, 4);
      return;
    }
    case DType::kBFloat16: {
      const std::uint16_t h = float_to_bf16(static_cast<float>(v));
      std::memcpy(b, &h, 2);
      return;
    }
    case DType::kFloat16: {
      const std::uint16_t h = float_to_fp16(static_cast<float>(v));
      std::memcpy(b, &h, 2);
      return;
    }
    case DType::kInt32: {
      const auto x = static_cast<std::int32_t>(v);
      std::memcpy(b, &x, 4);
      return;
    }
    case DType::kInt64: {
      const auto x = static_cast<std::int64_t>(v);
      std::memcpy(b, &x, 8);
      return;
    }
    default: {
      const auto x = static_cast<std::uint8_t>(v);
      std::memcpy(b, &x, 1);
      return;
    }
  }
}

// Stores an integer result exactly (a double cannot hold every int64 sum).
inline void store_integer(DType dtype, void* dst, std::int64_t i, std::int64_t v) {
  auto* b = static_cast<std::byte*>(dst) + static_cast<std::size_t>(i) * dtype_size(dtype);
  if (dtype == DType::kInt32) {
    const auto x = static_cast<std::int32_t>(v);
    std::memcpy(b, &x, 4);
  } else {
    std::memcpy(b, &v, 8);
  }
}

// Owning buffer with a view.
// The dtype x op pairs the collective tests run: every dtype family, every op, 16-bit rounding.
struct ReductionCase {
  DType dtype;
  ReduceOp op;
};
constexpr ReductionCase kReductionCases[] = {
    {DType::kFloat32, ReduceOp::kSum},  {DType::kFloat32, ReduceOp::kAvg},
    {DType::kFloat32, ReduceOp::kMax},  {DType::kBFloat16, ReduceOp::kSum},
    {DType::kBFloat16, ReduceOp::kAvg}, {DType::kFloat16, ReduceOp::kMax},
    {DType::kInt32, ReduceOp::kSum},    {DType::kInt64, ReduceOp::kMax},
};

struct Buffer {
  DType dtype = DType::kFloat32;
  std::int64_t numel = 0;
  std::vector<std::byte> bytes;

  Buffer() = default;
  Buffer(DType d, std::int64_t n, std::byte fill = std::byte{0xAB})
      : dtype(d), numel(n), bytes(static_cast<std::size_t>(n) * dtype_size(d) + 1, fill) {}
  TensorView view() { return {bytes.data(), numel, dtype}; }
  TensorView slice(std::int64_t offset, std::int64_t count) { return view().slice(offset, count); }
  bool same_bits(const Buffer& other) const {
    return numel == other.numel && dtype == other.dtype &&
           std::memcmp(bytes.data(), other.bytes.data(),
                       static_cast<std::size_t>(numel) * dtype_size(dtype)) == 0;
  }
};

// Elements [offset, offset + n) of rank `rank`'s generated data, in elements [at, at + n) of out.
inline void fill_rank_data(Buffer& out, std::uint64_t seed, int rank, std::int64_t offset,
                           std::int64_t n, std::int64_t at = 0) {
  for (std::int64_t i = 0; i < n; ++i) {
    store(out.dtype, out.bytes.data(), at + i, value_at(out.dtype, seed, rank, offset + i));
  }
}

inline Buffer rank_data(DType dtype, std::uint64_t seed, int rank, std::int64_t n) {
  Buffer b(dtype, n);
  fill_rank_data(b, seed, rank, 0, n);
  return b;
}

// Reference of reducing elements [offset, offset + n) of every rank's data with `op`: floats are
// summed in fp32 (exact by construction of the data), AVG divides the fp32 sum by p, and the
// result is rounded once to the dtype; integers in int64.
inline Buffer reference_reduce(DType dtype, ReduceOp op, std::uint64_t seed, int p,
                               std::int64_t offset, std::int64_t n) {
  Buffer out(dtype, n);
  for (std::int64_t i = 0; i < n; ++i) {
    if (dtype == DType::kInt32 || dtype == DType::kInt64) {
      std::int64_t acc = static_cast<std::int64_t>(value_at(dtype, seed, 0, offset + i));
      for (int r = 1; r < p; ++r) {
        const auto v = static_cast<std::int64_t>(value_at(dtype, seed, r, offset + i));
        acc = op == ReduceOp::kMax ? std::max(acc, v) : acc + v;
      }
      store_integer(dtype, out.bytes.data(), i, acc);
      continue;
    }
    float acc = static_cast<float>(value_at(dtype, seed, 0, offset + i));
    for (int r = 1; r < p; ++r) {
      const auto v = static_cast<float>(value_at(dtype, seed, r, offset + i));
      acc = op == ReduceOp::kMax ? std::max(acc, v) : acc + v;
    }
    if (op == ReduceOp::kAvg) acc /= static_cast<float>(p);
    store(dtype, out.bytes.data(), i, acc);
  }
  return out;
}

inline std::string op_label(DType dtype, ReduceOp op) {
  const char* name = op == ReduceOp::kSum ? "SUM" : op == ReduceOp::kAvg ? "AVG" : "MAX";
  return std::string(dtype_name(dtype)) + " " + name;
}

// Values of mixed magnitudes (10^-3 .. 10^3): a sum in any other rank order rounds differently.
inline float order_sensitive_value(int rank, std::int64_t i) {
  return static_cast<float>(std::sin(0.37 * static_cast<double>(i) + 1.3 * rank) *
                            std::pow(10.0, static_cast<double>((i + rank) % 7 - 3)));
}

}  // namespace shardwise::testing_comm
