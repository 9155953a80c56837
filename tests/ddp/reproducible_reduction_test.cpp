#include "shardwise/ddp/reproducible_reduction.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "shardwise/core/error.hpp"

namespace shardwise {
namespace {

// The tree written out one element at a time: sum(v) = sum(v[0::2]) + sum(v[1::2]).
float reference_even_odd_sum(const std::vector<float>& v) {
  if (v.size() == 1) return v[0];
  std::vector<float> even, odd;
  for (std::size_t i = 0; i < v.size(); ++i) (i % 2 == 0 ? even : odd).push_back(v[i]);
  return reference_even_odd_sum(even) + reference_even_odd_sum(odd);
}

std::vector<std::vector<float>> random_leaves(std::size_t count, std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  // Wide magnitudes: a different order of adds rounds differently.
  std::uniform_real_distribution<float> mantissa(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-12, 12);
  std::vector<std::vector<float>> leaves(count, std::vector<float>(n));
  for (auto& leaf : leaves) {
    for (float& x : leaf) x = std::ldexp(mantissa(rng), exponent(rng));
  }
  return leaves;
}

TEST(EvenOddTreeSum, MatchesTheElementwiseReferenceForAnyLeafCount) {
  constexpr std::size_t kElements = 37;
  for (std::size_t count = 1; count <= 13; ++count) {
    const auto leaves = random_leaves(count, kElements, static_cast<unsigned>(count));
    std::vector<const float*> pointers;
    for (const auto& leaf : leaves) pointers.push_back(leaf.data());
    std::vector<float> out(kElements);
    even_odd_tree_sum(out, pointers);
    for (std::size_t i = 0; i < kElements; ++i) {
      std::vector<float> column;
      for (const auto& leaf : leaves) column.push_back(leaf[i]);
      EXPECT_EQ(std::bit_cast<std::uint32_t>(out[i]),
                std::bit_cast<std::uint32_t>(reference_even_odd_sum(column)))
          << count << " leaves, element " << i;
    }
  }
}

// What makes the mode work: summing each rank's micro-batches (g = micro * dp + rank) with the
// tree and then the rank partials with the tree gives the bits of the tree over all G leaves.
TEST(EvenOddTreeSum, RankPartialsThenRanksEqualTheWholeTreeForPowerOfTwoDp) {
  constexpr std::size_t kElements = 29, kGlobal = 24;
  const auto leaves = random_leaves(kGlobal, kElements, 7);
  std::vector<const float*> all;
  for (const auto& leaf : leaves) all.push_back(leaf.data());
  std::vector<float> whole(kElements);
  even_odd_tree_sum(whole, all);
  for (const std::size_t dp : {1, 2, 4, 8}) {
    std::vector<std::vector<float>> partials(dp, std::vector<float>(kElements));
    std::vector<const float*> partial_pointers;
    for (std::size_t rank = 0; rank < dp; ++rank) {
      std::vector<const float*> mine;
      for (std::size_t g = rank; g < kGlobal; g += dp) mine.push_back(leaves[g].data());
      even_odd_tree_sum(partials[rank], mine);
      partial_pointers.push_back(partials[rank].data());
    }
    std::vector<float> combined(kElements);
    even_odd_tree_sum(combined, partial_pointers);
    EXPECT_EQ(std::memcmp(combined.data(), whole.data(), kElements * sizeof(float)), 0)
        << "dp=" << dp;
  }
  // A different order (plain left to right) does round differently on these inputs, so the
  // comparison above can tell orders apart.
  bool any_differs = false;
  for (std::size_t i = 0; i < kElements; ++i) {
    float sequential = 0;
    for (const auto& leaf : leaves) sequential += leaf[i];
    any_differs |=
        std::bit_cast<std::uint32_t>(sequential) != std::bit_cast<std::uint32_t>(whole[i]);
  }
  EXPECT_TRUE(any_differs);
}

TEST(ReproducibleGradReduction, RefusesADataParallelSizeThatIsNoPowerOfTwo) {
  for (const int dp : {3, 6, 0}) {
    try {
      ReproducibleGradReduction reduction(dp);
      ADD_FAILURE() << "dp=" << dp << " accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(str_cat("dp is ", dp)), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("ddp.reproducible_reduction"), std::string::npos);
    }
  }
  EXPECT_NO_THROW(ReproducibleGradReduction(4));
}

}  // namespace
}  // namespace shardwise
