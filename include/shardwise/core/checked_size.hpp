// Products of sizes read from input (parallel sizes, model dimensions, batch sizes): computed
// without overflow, and refused with a message that names every factor when they pass a bound.
// int arithmetic on such products wrapped (tp x pp) or trapped (pp x vp = 2^32 divided by).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include "shardwise/core/error.hpp"

namespace shardwise {

// Bounds on sizes read from input that no real job reaches (the largest training jobs run on
// well under 1M ranks, with hundreds of layers and hidden sizes in the tens of thousands). Above
// them a value is a typo or hostile, and work proportional to it would run without end.
inline constexpr std::int64_t kMaxStep = 1'000'000'000'000;  // optimizer steps (as manifests)
inline constexpr std::int64_t kMaxParallelSize = std::int64_t{1} << 20;  // world, dp, tp, pp, ...
inline constexpr std::int64_t kMaxLayers = 100'000;
inline constexpr std::int64_t kMaxModelDimension = std::int64_t{1}
                                                   << 24;               // hidden, ffn, vocab, seq
inline constexpr std::int64_t kMaxBatchFactor = std::int64_t{1} << 20;  // micro-batch, accumulation
inline constexpr std::int64_t kMaxExperts = std::int64_t{1} << 16;
inline constexpr std::int64_t kMaxSpecParams = std::int64_t{1} << 24;  // params in a model spec
// Samples a run may consume (the data position): exact in a double, as JSON readers keep it.
inline constexpr std::int64_t kMaxSampleIndex = std::int64_t{1} << 53;

// One factor of a product, named as the user wrote it ("parallel.tp").
struct NamedSize {
  std::string_view name;
  std::int64_t value;
};

// a * b, or nothing when it does not fit in int64.
inline std::optional<std::int64_t> checked_mul(std::int64_t a, std::int64_t b) {
  std::int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) return std::nullopt;
  return out;
}

// a + b, or nothing when it does not fit in int64.
inline std::optional<std::int64_t> checked_add(std::int64_t a, std::int64_t b) {
  std::int64_t out = 0;
  if (__builtin_add_overflow(a, b, &out)) return std::nullopt;
  return out;
}

// The product of the factors when it is at most `limit`; nothing when larger or not in int64.
std::optional<std::int64_t> product_within(std::initializer_list<NamedSize> factors,
                                           std::int64_t limit);

// Why a product was refused: "parallel.pp (65536) x parallel.vp (65536) = 4294967296 exceeds
// the limit of 1048576" (or "... overflows 64 bits").
std::string describe_product_refusal(std::initializer_list<NamedSize> factors, std::int64_t limit);

// The product of `factors`; throws E (with `where` in front, when given) naming each factor when
// it exceeds `limit` or does not fit in 64 bits.
template <typename E>
std::int64_t checked_product(std::initializer_list<NamedSize> factors,
                             std::int64_t limit = std::numeric_limits<std::int64_t>::max(),
                             std::string_view where = {}) {
  const auto product = product_within(factors, limit);
  if (!product) {
    throw E(str_cat(where, where.empty() ? "" : ": ", describe_product_refusal(factors, limit)));
  }
  return *product;
}

}  // namespace shardwise
