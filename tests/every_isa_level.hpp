// The shape of every "each ISA level gives the baseline's result" test: compute once at the
// baseline level, then at every level this CPU supports (the baseline again included), and hand
// each result with the baseline's to a check.
#pragma once

#include <utility>

#include "shardwise/core/cpu_isa.hpp"

namespace shardwise::test {

// compute() returns the result to compare; check(level, got, baseline) asserts on it.
template <typename Compute, typename Check>
void compare_every_isa_level_with_baseline(Compute&& compute, Check&& check) {
  decltype(compute()) baseline;
  {
    ScopedIsaLevel forced(IsaLevel::kBaseline);
    baseline = compute();
  }
  for (IsaLevel level : supported_isa_levels()) {
    ScopedIsaLevel forced(level);
    check(level, compute(), baseline);
  }
}

}  // namespace shardwise::test
