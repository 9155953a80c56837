// What the bench_<name> mains share: timers, the fastest of repeated runs, syscall checks and the
// "--key value" command line of the benches that take options.
#pragma once

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "shardwise/core/error.hpp"

namespace shardwise::bench {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

inline double seconds_of(const std::function<void()>& work) {
  const auto start = Clock::now();
  work();
  return seconds_since(start);
}

// The fastest repeat: on a shared machine the noise (other processes' I/O and CPU) only ever
// adds time, so the minimum is the most reproducible estimate of the cost itself.
inline double best(const std::vector<double>& seconds) {
  return *std::min_element(seconds.begin(), seconds.end());
}

// The middle value of `values` (the upper one of the two middle values for an even count): the
// median every bench reports.
inline double median(std::vector<double> values) {
  SW_CHECK(!values.empty(), "the median of no values");
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// Throws IoError naming the call, the path and errno's text when a syscall failed.
inline void check_syscall(bool ok, const char* what, const std::filesystem::path& path) {
  if (!ok) throw IoError(str_cat(what, " '", path.string(), "': ", std::strerror(errno)));
}

// One "--key value" option and the variable its value goes to.
struct BenchOption {
  std::string_view key;
  std::variant<int*, std::int64_t*, std::string*> target;
};

// Reads the "--key value" pairs of argv into the options' targets (a trailing key without a value
// is ignored). Throws InvalidArgument naming the bench for an unknown key; a value that is not a
// number throws std::invalid_argument.
inline void parse_bench_options(std::string_view bench, int argc, char** argv,
                                std::initializer_list<BenchOption> options) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i];
    const std::string value = argv[i + 1];
    const BenchOption* match = nullptr;
    for (const BenchOption& option : options) {
      if (option.key == key) match = &option;
    }
    SW_REQUIRE(match != nullptr, InvalidArgument, bench, ": unknown option ", key);
    if (auto* i32 = std::get_if<int*>(&match->target)) {
      **i32 = std::stoi(value);
    } else if (auto* i64 = std::get_if<std::int64_t*>(&match->target)) {
      **i64 = std::stoll(value);
    } else {
      *std::get<std::string*>(match->target) = value;
    }
  }
}

}  // namespace shardwise::bench
