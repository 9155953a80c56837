// The traffic model on known numbers.
#include "shardwise/comm/traffic_model.hpp"

#include <gtest/gtest.h>

namespace shardwise {
namespace {

TEST(TrafficModel, KnownNumbers) {
  EXPECT_EQ(all_reduce_traffic(1000, 4).sent, 1500);  // 2 * 3/4 * 1000
  EXPECT_EQ(all_reduce_traffic(1000, 4).received, 1500);
  EXPECT_EQ(all_reduce_traffic(1000, 3).sent, 1333);  // 4000/3 rounded down
  EXPECT_EQ(all_reduce_traffic(1000, 1).sent, 0);
  EXPECT_EQ(reduce_scatter_traffic(800, 4).sent, 600);
  EXPECT_EQ(all_gather_traffic(800, 4).received, 600);
  EXPECT_EQ(all_gather_traffic(800, 1).received, 0);
  EXPECT_EQ(all_gather_v_traffic(10, 100, 4).sent, 30);
  EXPECT_EQ(all_gather_v_traffic(10, 100, 4).received, 90);
  // Chain 2 -> 3 -> 0 -> 1: rank 1 is last.
  EXPECT_EQ(broadcast_traffic(64, 4, 2, 2).sent, 64);
  EXPECT_EQ(broadcast_traffic(64, 4, 2, 2).received, 0);
  EXPECT_EQ(broadcast_traffic(64, 4, 1, 2).sent, 0);
  EXPECT_EQ(broadcast_traffic(64, 4, 1, 2).received, 64);
  EXPECT_EQ(broadcast_traffic(64, 4, 0, 2).sent, 64);
  EXPECT_EQ(broadcast_traffic(64, 1, 0, 0).sent, 0);
  EXPECT_EQ(broadcast_traffic(64, 1, 0, 0).received, 0);
}

TEST(TrafficModel, RecorderAccumulatesAndResets) {
  TrafficRecorder rec;
  rec.record(CollectiveKind::kAllReduce, {10, 10});
  rec.record(CollectiveKind::kAllReduce, {5, 5});
  rec.record(CollectiveKind::kSend, {7, 0});
  TrafficCounters t = rec.snapshot();
  EXPECT_EQ(t.bytes_sent.at(CollectiveKind::kAllReduce), 15);
  EXPECT_EQ(t.calls.at(CollectiveKind::kAllReduce), 2);
  EXPECT_EQ(t.bytes_sent.at(CollectiveKind::kBarrier), 0);  // every kind present
  EXPECT_EQ(t.total_sent(), 22);
  EXPECT_EQ(t.total_received(), 15);
  rec.reset();
  EXPECT_EQ(rec.snapshot().total_sent(), 0);
  EXPECT_EQ(std::string(collective_kind_name(CollectiveKind::kAllGatherV)), "all_gather_v");
}

}  // namespace
}  // namespace shardwise
