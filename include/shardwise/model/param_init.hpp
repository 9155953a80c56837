// Deterministic parameter initialisation, independent of layout, rank and world size.
#pragma once

#include <cstdint>
#include <string_view>

namespace shardwise {

// 64-bit stream seed from a run seed and a parameter name (FNV-1a of the name mixed with seed).
std::uint64_t param_stream_seed(std::uint64_t seed, std::string_view name);

// Fills values with N(0, std^2) draws from a splitmix64 + Box–Muller stream seeded by
// param_stream_seed(seed, name). Same inputs give the same bits on every platform we build on.
template <typename Scalar>
void fill_normal(Scalar* values, std::int64_t count, double std, std::uint64_t seed,
                 std::string_view name);

}  // namespace shardwise
