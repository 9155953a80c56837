#include "shardwise/core/closest_name.hpp"

#include <gtest/gtest.h>

#include <array>

namespace shardwise {
namespace {

TEST(EditDistance, KnownValues) {
  EXPECT_EQ(edit_distance("", ""), 0u);
  EXPECT_EQ(edit_distance("lr", "lrr"), 1u);
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(edit_distance("abc", ""), 3u);
  EXPECT_EQ(edit_distance("flaw", "lawn"), 2u);
  EXPECT_EQ(edit_distance("modle", "model"), 1u) << "an adjacent swap is one edit";
  EXPECT_EQ(edit_distance("ca", "abc"), 3u);
}

TEST(ClosestName, SuggestsOnlyPlausibleTypos) {
  constexpr std::array<std::string_view, 4> keys = {"lr", "min_lr", "weight_decay", "kind"};
  EXPECT_EQ(closest_name("lrr", keys), "lr");
  EXPECT_EQ(closest_name("weight_decy", keys), "weight_decay");
  EXPECT_EQ(closest_name("KIND", keys), "kind") << "case is ignored";
  EXPECT_EQ(closest_name("momentum", keys), std::nullopt);
  EXPECT_EQ(did_you_mean("min_l", keys), " (did you mean min_lr?)");
  EXPECT_EQ(did_you_mean("zzzz", keys), "");
}

}  // namespace
}  // namespace shardwise
