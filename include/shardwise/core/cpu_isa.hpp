// Run-time choice of the instruction set for the element-wise kernels. The project builds for
// the baseline x86-64 ISA (SSE2, no -march), so one binary runs everywhere; each kernel is also
// compiled for AVX2 and AVX-512 (per-function target attributes, see SW_TARGET_* below) and a
// dispatch table picks the best level the CPU has. Tests and benchmarks can force a lower level.
//
// Kernels are compiled without FMA on every level, so each level gives the same bits as the
// baseline: the choice of level changes speed, never results.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace shardwise {

enum class IsaLevel : std::uint8_t {
  kBaseline,  // what the compiler targets by default (SSE2 on x86-64)
  kAvx2,
  kAvx512,  // AVX-512 F + BW + VL + DQ
};

inline constexpr int kNumIsaLevels = 3;

std::string_view isa_level_name(IsaLevel level);

// The best level this CPU (and this build) supports.
IsaLevel detected_isa_level();

// Every level this CPU supports, lowest first (always starts with kBaseline).
std::vector<IsaLevel> supported_isa_levels();

// The level the dispatch tables use now: detected_isa_level() unless forced.
IsaLevel active_isa_level();

// Forces the dispatch tables to `level` (for tests and benchmarks). Throws InvalidArgument when
// the CPU lacks it. Not meant to race with running kernels.
void set_isa_level(IsaLevel level);

// Restores the previous level when it goes out of scope.
class ScopedIsaLevel {
 public:
  explicit ScopedIsaLevel(IsaLevel level);
  ~ScopedIsaLevel();
  ScopedIsaLevel(const ScopedIsaLevel&) = delete;
  ScopedIsaLevel& operator=(const ScopedIsaLevel&) = delete;

 private:
  IsaLevel previous_;
};

// Picks the entry of a per-level table (indexed by IsaLevel) for the active level.
template <typename T>
const T& dispatch(const T (&table)[kNumIsaLevels]) {
  return table[static_cast<int>(active_isa_level())];
}

}  // namespace shardwise

// Function attributes that compile one function for a higher level. Without FMA on purpose
// (see above). On other compilers / architectures they are empty and all levels are the same.
#if defined(__x86_64__) && defined(__GNUC__)
#define SW_HAVE_ISA_LEVELS 1
#define SW_TARGET_AVX2 __attribute__((target("avx2")))
#define SW_TARGET_AVX512 __attribute__((target("avx2,avx512f,avx512bw,avx512vl,avx512dq")))
#else
#define SW_HAVE_ISA_LEVELS 0
#define SW_TARGET_AVX2
#define SW_TARGET_AVX512
#endif
// Kernel bodies are templates marked this way so they inline into each target-specific wrapper
// and get vectorised for that wrapper's ISA.
#define SW_KERNEL_INLINE [[gnu::always_inline]] inline
