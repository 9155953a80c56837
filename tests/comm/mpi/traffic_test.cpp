// Traffic counters equal the ring-algorithm formulas exactly (written out here independently of
// src/comm/process_group.cpp).
#include <gtest/gtest.h>

#include "comm/comm_test_data.hpp"
#include "shardwise/comm/mpi_process_group.hpp"

namespace shardwise {
namespace {

using testing_comm::Buffer;

TEST(Traffic, CountersEqualRingFormulas) {
  ProcessGroupPtr world = init_mpi_world();
  const std::int64_t p = world->size();
  const int me = world->rank();
  world->reset_traffic();

  // all_reduce: fp32, 1024p elements -> N = 4096p bytes; 2(p-1)N/p each way.
  Buffer ar(DType::kFloat32, 1024 * p);
  std::fill(ar.bytes.begin(), ar.bytes.end(), std::byte{0});
  world->all_reduce(ar.view(), ReduceOp::kSum)->wait();
  // A bf16 reduction counts bf16 bytes even though it is staged through fp32: 3000 bytes.
  Buffer ar16(DType::kBFloat16, 1500);
  std::fill(ar16.bytes.begin(), ar16.bytes.end(), std::byte{0});
  world->all_reduce(ar16.view(), ReduceOp::kAvg)->wait();
  // reduce_scatter: bf16 input of 300p elements -> N = 600p bytes; (p-1)N/p.
  Buffer rs_in(DType::kBFloat16, 300 * p);
  std::fill(rs_in.bytes.begin(), rs_in.bytes.end(), std::byte{0});
  Buffer rs_out(DType::kBFloat16, 300);
  world->reduce_scatter(rs_out.view(), rs_in.view(), ReduceOp::kSum)->wait();
  // all_gather: int64 output of 50p elements -> N = 400p bytes; (p-1)N/p.
  Buffer ag_in(DType::kInt64, 50);
  Buffer ag_out(DType::kInt64, 50 * p);
  world->all_gather(ag_out.view(), ag_in.view())->wait();
  // all_gather_v: rank r contributes r+1 fp16 elements.
  std::vector<std::int64_t> counts;
  for (int r = 0; r < p; ++r) counts.push_back(r + 1);
  const std::int64_t total = p * (p + 1) / 2;
  Buffer agv_in(DType::kFloat16, me + 1);
  Buffer agv_out(DType::kFloat16, total);
  world->all_gather_v(agv_out.view(), agv_in.view(), counts)->wait();
  // broadcast: 1000 bytes from root 1 % p; chain root, root+1, ...: the rank before the root is
  // last and sends nothing, the root receives nothing.
  const int root = 1 % static_cast<int>(p);
  Buffer bc(DType::kUInt8, 1000);
  world->broadcast(bc.view(), root)->wait();
  // send/recv: 100 bytes around the ring, twice.
  Buffer out(DType::kUInt8, 100);
  Buffer in(DType::kUInt8, 100);
  for (int i = 0; i < 2; ++i) {
    WorkPtr s = world->send(out.view(), (me + 1) % static_cast<int>(p), 3);
    WorkPtr r = world->recv(in.view(), (me + static_cast<int>(p) - 1) % static_cast<int>(p), 3);
    s->wait();
    r->wait();
  }
  world->barrier()->wait();

  const TrafficCounters t = world->traffic();
  const std::int64_t ar_bytes = 2 * (p - 1) * (4096 * p) / p + 2 * (p - 1) * 3000 / p;
  EXPECT_EQ(t.bytes_sent.at(CollectiveKind::kAllReduce), ar_bytes);
  EXPECT_EQ(t.bytes_received.at(CollectiveKind::kAllReduce), ar_bytes);
  EXPECT_EQ(t.calls.at(CollectiveKind::kAllReduce), 2);
  EXPECT_EQ(t.bytes_sent.at(CollectiveKind::kReduceScatter), (p - 1) * 600);
  EXPECT_EQ(t.bytes_received.at(CollectiveKind::kReduceScatter), (p - 1) * 600);
  EXPECT_EQ(t.bytes_sent.at(CollectiveKind::kAllGather), (p - 1) * 400);
  EXPECT_EQ(t.bytes_received.at(CollectiveKind::kAllGather), (p - 1) * 400);
  EXPECT_EQ(t.bytes_sent.at(CollectiveKind::kAllGatherV), 2 * (me + 1) * (p - 1));
  EXPECT_EQ(t.bytes_received.at(CollectiveKind::kAllGatherV), 2 * (total - (me + 1)));
  const int last = (root + static_cast<int>(p) - 1) % static_cast<int>(p);
  EXPECT_EQ(t.bytes_sent.at(CollectiveKind::kBroadcast), me == last ? 0 : 1000);
  EXPECT_EQ(t.bytes_received.at(CollectiveKind::kBroadcast), me == root ? 0 : 1000);
  EXPECT_EQ(t.bytes_sent.at(CollectiveKind::kSend), 200);
  EXPECT_EQ(t.bytes_received.at(CollectiveKind::kSend), 0);
  EXPECT_EQ(t.bytes_received.at(CollectiveKind::kRecv), 200);
  EXPECT_EQ(t.bytes_sent.at(CollectiveKind::kRecv), 0);
  EXPECT_EQ(t.calls.at(CollectiveKind::kSend), 2);
  EXPECT_EQ(t.calls.at(CollectiveKind::kBarrier), 1);
  EXPECT_EQ(t.bytes_sent.at(CollectiveKind::kBarrier), 0);
  // Over the whole group every byte sent is received once.
  std::int64_t totals[2] = {t.total_sent(), t.total_received()};
  Buffer sums(DType::kInt64, 2);
  std::memcpy(sums.bytes.data(), totals, sizeof(totals));
  world->all_reduce(sums.view(), ReduceOp::kSum)->wait();
  std::memcpy(totals, sums.bytes.data(), sizeof(totals));
  EXPECT_EQ(totals[0], totals[1]);

  world->reset_traffic();
  EXPECT_EQ(world->traffic().total_sent(), 0);
  EXPECT_EQ(world->traffic().calls.at(CollectiveKind::kAllReduce), 0);
}

}  // namespace
}  // namespace shardwise
