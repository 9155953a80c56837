// How much of a long sweep the sanitizer build runs. Under AddressSanitizer at -O0 the layout
// code runs ~50x slower than in the release build, so the exhaustive sweeps (every zoo model,
// every shard-group size, hundreds of random models) would take most of CI's time there. The
// release build runs every case; the sanitizer build runs an evenly spread sample of the random
// sweeps, which still executes the same code paths under memory checking, and skips the
// whole-zoo quality comparisons, whose code the smaller tests already run under it.
#pragma once

#include <gtest/gtest.h>

namespace shardwise::test {

#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kSanitizedBuild = true;
#else
inline constexpr bool kSanitizedBuild = false;
#endif

// Cases of a random sweep to run: all of them, or about one in eight under the sanitizers.
inline constexpr int sweep_cases(int cases) { return kSanitizedBuild ? (cases + 7) / 8 : cases; }

}  // namespace shardwise::test

// First statement of a test that only the release build runs (see above).
#define SW_SKIP_UNDER_SANITIZERS()                                                               \
  do {                                                                                           \
    if (::shardwise::test::kSanitizedBuild)                                                      \
      GTEST_SKIP() << "whole-zoo sweep: runs in the release build (tests/sanitizer_budget.hpp)"; \
  } while (false)
