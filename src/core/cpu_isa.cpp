#include "shardwise/core/cpu_isa.hpp"

#include <atomic>

#include "shardwise/core/error.hpp"

namespace shardwise {
namespace {

IsaLevel detect() {
#if SW_HAVE_ISA_LEVELS
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq")) {
    return IsaLevel::kAvx512;
  }
  if (__builtin_cpu_supports("avx2")) return IsaLevel::kAvx2;
#endif
  return IsaLevel::kBaseline;
}

// Detected once; a plain atomic so every kernel call reads it without a lock.
std::atomic<IsaLevel>& active() {
  static std::atomic<IsaLevel> level{detected_isa_level()};
  return level;
}

}  // namespace

std::string_view isa_level_name(IsaLevel level) {
  switch (level) {
    case IsaLevel::kBaseline:
      return "baseline";
    case IsaLevel::kAvx2:
      return "avx2";
    case IsaLevel::kAvx512:
      return "avx512";
  }
  return "unknown";
}

IsaLevel detected_isa_level() {
  static const IsaLevel level = detect();
  return level;
}

std::vector<IsaLevel> supported_isa_levels() {
  std::vector<IsaLevel> out;
  for (int i = 0; i <= static_cast<int>(detected_isa_level()); ++i) {
    out.push_back(static_cast<IsaLevel>(i));
  }
  return out;
}

IsaLevel active_isa_level() { return active().load(std::memory_order_relaxed); }

void set_isa_level(IsaLevel level) {
  SW_REQUIRE(static_cast<int>(level) <= static_cast<int>(detected_isa_level()), InvalidArgument,
             "ISA level ", isa_level_name(level), " is not supported by this CPU (best: ",
             isa_level_name(detected_isa_level()), ")");
  active().store(level, std::memory_order_relaxed);
}

ScopedIsaLevel::ScopedIsaLevel(IsaLevel level) : previous_(active_isa_level()) {
  set_isa_level(level);
}

ScopedIsaLevel::~ScopedIsaLevel() { active().store(previous_, std::memory_order_relaxed); }

}  // namespace shardwise
