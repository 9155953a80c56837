// The rule that picks an MPI group's collective algorithm (select_collective_algorithm): the
// kAuto threshold, the shared-memory fallback, and that the collective segment set-up is asked
// for exactly when shared memory is the choice.
#include "../../src/comm/collective_selection.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace shardwise {
namespace {

// Answers `available` with a fixed value and records what it was asked.
struct AvailabilityProbe {
  bool shared_memory = true;
  std::vector<CollectiveAlgorithm> asked;

  CollectiveAlgorithm select(CollectiveAlgorithm requested, int group_size, std::size_t bytes) {
    return select_collective_algorithm(requested, group_size, bytes, [this](CollectiveAlgorithm a) {
      asked.push_back(a);
      return a == CollectiveAlgorithm::kSharedMemory && shared_memory;
    });
  }
};

constexpr CollectiveAlgorithm kAll[] = {CollectiveAlgorithm::kAuto, CollectiveAlgorithm::kRing,
                                        CollectiveAlgorithm::kDirect, CollectiveAlgorithm::kMpi,
                                        CollectiveAlgorithm::kSharedMemory};

TEST(CollectiveSelection, AGroupOfOneRankAlwaysUsesMpi) {
  for (CollectiveAlgorithm requested : kAll) {
    for (std::size_t bytes : {std::size_t{0}, kP2PMinShardBytes, std::size_t{1} << 30}) {
      AvailabilityProbe probe;
      EXPECT_EQ(probe.select(requested, 1, bytes), CollectiveAlgorithm::kMpi);
      EXPECT_TRUE(probe.asked.empty());
    }
  }
}

TEST(CollectiveSelection, AutoUsesMpiBelowFourKibibytesAndSharedMemoryFromThere) {
  EXPECT_EQ(kP2PMinShardBytes, 4096u);
  AvailabilityProbe probe;
  EXPECT_EQ(probe.select(CollectiveAlgorithm::kAuto, 4, kP2PMinShardBytes - 1),
            CollectiveAlgorithm::kMpi);
  EXPECT_TRUE(probe.asked.empty()) << "no segment set-up for a small shard";
  EXPECT_EQ(probe.select(CollectiveAlgorithm::kAuto, 4, kP2PMinShardBytes),
            CollectiveAlgorithm::kSharedMemory);
  EXPECT_EQ(probe.asked, std::vector<CollectiveAlgorithm>{CollectiveAlgorithm::kSharedMemory});
}

TEST(CollectiveSelection, WithoutASegmentAutoAndSharedMemoryFallBackToDirect) {
  for (CollectiveAlgorithm requested :
       {CollectiveAlgorithm::kAuto, CollectiveAlgorithm::kSharedMemory}) {
    AvailabilityProbe probe;
    probe.shared_memory = false;
    EXPECT_EQ(probe.select(requested, 2, std::size_t{1} << 20), CollectiveAlgorithm::kDirect);
    EXPECT_EQ(probe.asked, std::vector<CollectiveAlgorithm>{CollectiveAlgorithm::kSharedMemory});
  }
}

TEST(CollectiveSelection, SharedMemoryAsRequestedAppliesToSmallShardsToo) {
  AvailabilityProbe probe;
  EXPECT_EQ(probe.select(CollectiveAlgorithm::kSharedMemory, 2, 8),
            CollectiveAlgorithm::kSharedMemory);
  EXPECT_EQ(probe.asked.size(), 1u);
}

TEST(CollectiveSelection, RingDirectAndMpiAreUsedAsRequestedAtEverySize) {
  for (CollectiveAlgorithm requested :
       {CollectiveAlgorithm::kRing, CollectiveAlgorithm::kDirect, CollectiveAlgorithm::kMpi}) {
    for (std::size_t bytes : {std::size_t{8}, kP2PMinShardBytes, std::size_t{64} << 20}) {
      AvailabilityProbe probe;
      EXPECT_EQ(probe.select(requested, 3, bytes), requested);
      EXPECT_TRUE(probe.asked.empty());
    }
  }
}

}  // namespace
}  // namespace shardwise
