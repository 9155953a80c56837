#include "shardwise/core/cpu_isa.hpp"

#include <gtest/gtest.h>

#include "shardwise/core/error.hpp"

namespace shardwise {
namespace {

TEST(CpuIsa, SupportedLevelsStartAtBaselineAndEndAtDetected) {
  const std::vector<IsaLevel> levels = supported_isa_levels();
  ASSERT_FALSE(levels.empty());
  EXPECT_EQ(levels.front(), IsaLevel::kBaseline);
  EXPECT_EQ(levels.back(), detected_isa_level());
  EXPECT_EQ(active_isa_level(), detected_isa_level());  // nothing forced by default
}

TEST(CpuIsa, ScopedLevelForcesAndRestores) {
  for (IsaLevel level : supported_isa_levels()) {
    {
      ScopedIsaLevel forced(level);
      EXPECT_EQ(active_isa_level(), level) << isa_level_name(level);
    }
    EXPECT_EQ(active_isa_level(), detected_isa_level());
  }
}

TEST(CpuIsa, UnsupportedLevelIsRejectedByName) {
  if (detected_isa_level() == IsaLevel::kAvx512) GTEST_SKIP() << "this CPU has every level";
  try {
    set_isa_level(IsaLevel::kAvx512);
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("avx512"), std::string::npos) << e.what();
  }
  EXPECT_EQ(active_isa_level(), detected_isa_level());
}

TEST(CpuIsa, LevelNames) {
  EXPECT_EQ(isa_level_name(IsaLevel::kBaseline), "baseline");
  EXPECT_EQ(isa_level_name(IsaLevel::kAvx2), "avx2");
  EXPECT_EQ(isa_level_name(IsaLevel::kAvx512), "avx512");
}

}  // namespace
}  // namespace shardwise
