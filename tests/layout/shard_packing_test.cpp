#include "shardwise/layout/shard_packing.hpp"

#include <gtest/gtest.h>

#include <random>

namespace shardwise {
namespace {

void expect_valid(const ShardPacking& packing, const std::vector<PackItem>& items, int bins) {
  ASSERT_EQ(packing.num_bins(), bins);
  ASSERT_EQ(packing.bin_of.size(), items.size());
  std::vector<int> seen(items.size(), 0);
  const auto members = packing.bins();
  for (std::size_t b = 0; b < members.size(); ++b) {
    std::int64_t load = 0;
    for (std::size_t i : members[b]) {
      ++seen[i];
      load += items[i].units;
    }
    EXPECT_EQ(load, packing.loads[b]);
    EXPECT_LE(load, packing.shard_units);
  }
  for (int s : seen) EXPECT_EQ(s, 1);
}

TEST(ShardPacking, Units) {
  EXPECT_EQ(param_units(0), 1);
  EXPECT_EQ(param_units(1), 1);
  EXPECT_EQ(param_units(64), 1);
  EXPECT_EQ(param_units(65), 2);
  EXPECT_EQ(shard_units_lower_bound(10, 2, 3, 1), 4);
  EXPECT_EQ(shard_units_lower_bound(10, 5, 3, 1), 5);
  EXPECT_EQ(shard_units_lower_bound(10, 5, 3, 2), 6);
}

TEST(ShardPacking, ImprovesOnLptWherePerfectPackingExists) {
  // LPT on {3,3,2,2,2} into 2 bins gives 7/5; {3,3} {2,2,2} is perfect at 6.
  std::vector<PackItem> items = {{3, 0}, {3, 0}, {2, 0}, {2, 0}, {2, 0}};
  const auto packing = pack_into_shards(items, 2, 1);
  expect_valid(packing, items, 2);
  EXPECT_EQ(packing.shard_units, 6);
}

TEST(ShardPacking, ReachesLowerBoundOnRandomPerfectInstances) {
  // Instances built from a perfect packing (every bin filled to the same total).
  std::mt19937_64 rng(7);
  int reached = 0;
  const int trials = 100;
  for (int t = 0; t < trials; ++t) {
    const int bins = 2 + static_cast<int>(rng() % 7);
    const std::int64_t target = 50 + static_cast<std::int64_t>(rng() % 100);
    std::vector<PackItem> items;
    for (int b = 0; b < bins; ++b) {
      std::int64_t left = target;
      while (left > 0) {
        const std::int64_t u =
            std::min<std::int64_t>(left, 1 + static_cast<std::int64_t>(rng() % 40));
        items.push_back({u, static_cast<double>(u * u)});
        left -= u;
      }
    }
    std::shuffle(items.begin(), items.end(), rng);
    const auto packing = pack_into_shards(items, bins, 1);
    expect_valid(packing, items, bins);
    EXPECT_LE(packing.shard_units, target + target / 10);
    reached += packing.shard_units == target;
  }
  EXPECT_GE(reached, trials * 8 / 10);
}

TEST(ShardPacking, NeverWorseThanCappedNsGreedy) {
  std::mt19937_64 rng(11);
  for (int t = 0; t < 200; ++t) {
    const int bins = 1 + static_cast<int>(rng() % 12);
    std::vector<PackItem> items(1 + rng() % 40);
    for (auto& it : items) {
      it.units = 1 + static_cast<std::int64_t>(rng() % 1000);
      it.ns_cost = static_cast<double>(rng() % 100000);
    }
    const std::int64_t div = 1 + static_cast<std::int64_t>(rng() % 3);
    const auto ours = pack_into_shards(items, bins, div);
    const auto megatron = pack_capped_greedy_by_ns(items, bins, div);
    expect_valid(ours, items, bins);
    expect_valid(megatron, items, bins);
    EXPECT_LE(ours.shard_units, megatron.shard_units);
    EXPECT_EQ(ours.shard_units % div, 0);
  }
}

TEST(ShardPacking, BalanceKeepsShardSize) {
  std::vector<PackItem> items = {{4, 100}, {4, 100}, {4, 1}, {4, 1}, {2, 50}, {2, 50}};
  ShardPacking packing = pack_into_shards(items, 2, 1);
  const std::int64_t size = packing.shard_units;
  balance_ns_cost(packing, items);
  expect_valid(packing, items, 2);
  EXPECT_EQ(packing.shard_units, size);
  EXPECT_DOUBLE_EQ(packing.ns_costs[0], packing.ns_costs[1]);
}

}  // namespace
}  // namespace shardwise
