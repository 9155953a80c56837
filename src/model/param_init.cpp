#include "shardwise/model/param_init.hpp"

#include <cmath>
#include <numbers>

#include "shardwise/core/fnv1a.hpp"

namespace shardwise {

namespace {

std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Uniform in (0, 1]: never 0, so log() below is finite.
double uniform_open(std::uint64_t& state) {
  return (static_cast<double>(splitmix64(state) >> 11) + 1.0) * 0x1.0p-53;
}

}  // namespace

std::uint64_t param_stream_seed(std::uint64_t seed, std::string_view name) {
  std::uint64_t state = seed ^ fnv1a(name);
  return splitmix64(state);
}

template <typename Scalar>
void fill_normal(Scalar* values, std::int64_t count, double std, std::uint64_t seed,
                 std::string_view name) {
  std::uint64_t state = param_stream_seed(seed, name);
  for (std::int64_t i = 0; i < count; i += 2) {
    const double r = std::sqrt(-2.0 * std::log(uniform_open(state)));
    const double theta = 2.0 * std::numbers::pi * uniform_open(state);
    values[i] = static_cast<Scalar>(std * r * std::cos(theta));
    if (i + 1 < count) values[i + 1] = static_cast<Scalar>(std * r * std::sin(theta));
  }
}

template void fill_normal<float>(float*, std::int64_t, double, std::uint64_t, std::string_view);
template void fill_normal<double>(double*, std::int64_t, double, std::uint64_t, std::string_view);

}  // namespace shardwise
