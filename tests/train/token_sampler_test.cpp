// TokenSampler: greedy picks the argmax, sampling follows p^(1/T) renormalised over the top k,
// and the same seed gives the same draws.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "shardwise/core/error.hpp"
#include "shardwise/train/text_generation.hpp"

namespace shardwise {
namespace {

const std::vector<float> kProbs = {0.1f, 0.4f, 0.05f, 0.4f, 0.05f};

std::vector<double> frequencies(SamplingOptions options, int draws) {
  TokenSampler sampler(options);
  std::vector<double> count(kProbs.size(), 0);
  for (int i = 0; i < draws; ++i) count[sampler.next(kProbs)] += 1.0 / draws;
  return count;
}

TEST(TokenSampler, GreedyIsTheFirstLargest) {
  TokenSampler sampler({0.0, 0, 7});
  for (int i = 0; i < 5; ++i) EXPECT_EQ(sampler.next(kProbs), 1);  // tie 1 vs 3: lower index
  TokenSampler top1({5.0, 1, 7});
  for (int i = 0; i < 5; ++i) EXPECT_EQ(top1.next(kProbs), 1) << "top-1 is greedy at any T";
}

TEST(TokenSampler, TemperatureOneFollowsTheDistribution) {
  const auto f = frequencies({1.0, 0, 3}, 40000);
  // 4 standard deviations of a binomial frequency at n = 40000 is below 0.01.
  for (std::size_t i = 0; i < kProbs.size(); ++i) EXPECT_NEAR(f[i], kProbs[i], 0.01) << i;
}

TEST(TokenSampler, TemperatureAndTopKReshapeIt) {
  // T = 0.5: p^2 renormalised = {0.01, 0.16, 0.0025, 0.16, 0.0025} / 0.335.
  const auto cold = frequencies({0.5, 0, 3}, 40000);
  const double z = 0.01 + 0.16 + 0.0025 + 0.16 + 0.0025;
  EXPECT_NEAR(cold[0], 0.01 / z, 0.01);
  EXPECT_NEAR(cold[1], 0.16 / z, 0.01);
  EXPECT_NEAR(cold[2], 0.0025 / z, 0.005);
  // top-3 keeps {1, 3, 0} (0.4, 0.4, 0.1): renormalised over 0.9; 2 and 4 never appear.
  const auto top3 = frequencies({1.0, 3, 3}, 40000);
  EXPECT_NEAR(top3[0], 0.1 / 0.9, 0.01);
  EXPECT_NEAR(top3[1], 0.4 / 0.9, 0.01);
  EXPECT_EQ(top3[2], 0.0);
  EXPECT_EQ(top3[4], 0.0);
}

TEST(TokenSampler, SameSeedSameDrawsOtherSeedOtherDraws) {
  auto draws = [](std::uint64_t seed) {
    TokenSampler sampler({1.0, 0, seed});
    std::vector<int> out;
    for (int i = 0; i < 64; ++i) out.push_back(sampler.next(kProbs));
    return out;
  };
  EXPECT_EQ(draws(11), draws(11));
  EXPECT_NE(draws(11), draws(12));
}

TEST(TokenSampler, RejectsBadOptions) {
  EXPECT_THROW(TokenSampler({-0.1, 0, 0}), InvalidArgument);
  EXPECT_THROW(TokenSampler({NAN, 0, 0}), InvalidArgument);
  EXPECT_THROW(TokenSampler({1.0, -1, 0}), InvalidArgument);
}

}  // namespace
}  // namespace shardwise
