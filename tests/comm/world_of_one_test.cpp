// A program started without mpirun is a world of one rank (Open MPI singleton): every operation
// works, moves no bytes, and leaves data as a one-rank reduction/gather would.
#include <gtest/gtest.h>

#include "comm/comm_test_data.hpp"
#include "shardwise/comm/mpi_process_group.hpp"

namespace shardwise {
namespace {

using testing_comm::Buffer;
using testing_comm::rank_data;

TEST(WorldOfOne, InitIsIdempotentAndSizeOne) {
  ProcessGroupPtr world = init_mpi_world();
  EXPECT_EQ(world->size(), 1);
  EXPECT_EQ(world->rank(), 0);
  EXPECT_EQ(world->name(), "world");
  EXPECT_EQ(init_mpi_world().get(), world.get());
}

TEST(WorldOfOne, EveryOperation) {
  ProcessGroupPtr world = init_mpi_world();
  world->reset_traffic();
  for (DType dtype : {DType::kFloat32, DType::kBFloat16, DType::kFloat16}) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax}) {
      Buffer buf = rank_data(dtype, 1, 0, 100);
      world->all_reduce(buf.view(), op)->wait();
      EXPECT_TRUE(buf.same_bits(rank_data(dtype, 1, 0, 100))) << testing_comm::op_label(dtype, op);

      Buffer out(dtype, 100);
      world->reduce_scatter(out.view(), buf.view(), op)->wait();
      EXPECT_TRUE(out.same_bits(buf));
      world->reduce_scatter(buf.view(), buf.view(), op)->wait();  // in place
      EXPECT_TRUE(buf.same_bits(rank_data(dtype, 1, 0, 100)));
    }
  }
  for (DType dtype : kAllDTypes) {
    Buffer in = rank_data(dtype, 2, 0, 33);
    Buffer out(dtype, 33);
    world->all_gather(out.view(), in.view())->wait();
    EXPECT_TRUE(out.same_bits(in)) << dtype_name(dtype);
    world->all_gather(in.view(), in.view())->wait();
    EXPECT_TRUE(in.same_bits(rank_data(dtype, 2, 0, 33)));

    Buffer vout(dtype, 33);
    world->all_gather_v(vout.view(), in.view(), {33})->wait();
    EXPECT_TRUE(vout.same_bits(in));

    world->broadcast(in.view(), 0)->wait();
    EXPECT_TRUE(in.same_bits(rank_data(dtype, 2, 0, 33)));
  }
  // Send to and receive from oneself, past the eager limit: must not deadlock.
  Buffer big = rank_data(DType::kFloat32, 3, 0, 1 << 20);
  Buffer got(DType::kFloat32, 1 << 20);
  WorkPtr s = world->send(big.view(), 0, 9);
  WorkPtr r = world->recv(got.view(), 0, 9);
  r->wait();
  s->wait();
  EXPECT_TRUE(got.same_bits(big));
  world->barrier()->wait();
  EXPECT_NO_THROW(world->check_same_on_all_ranks(99, "anything"));

  const TrafficCounters t = world->traffic();
  for (const auto& [kind, bytes] : t.bytes_sent) {
    if (kind == CollectiveKind::kSend) {
      EXPECT_EQ(bytes, 4 << 20);  // point-to-point counts exact bytes, even to oneself
    } else {
      EXPECT_EQ(bytes, 0) << collective_kind_name(kind);
    }
  }
  EXPECT_EQ(t.bytes_received.at(CollectiveKind::kRecv), 4 << 20);
  EXPECT_EQ(t.calls.at(CollectiveKind::kAllReduce), 9);
  EXPECT_EQ(t.calls.at(CollectiveKind::kReduceScatter), 18);
  EXPECT_EQ(t.calls.at(CollectiveKind::kAllGather), 16);
  EXPECT_EQ(t.calls.at(CollectiveKind::kBarrier), 1);
}

TEST(WorldOfOne, IssueErrorsAndGroups) {
  ProcessGroupPtr world = init_mpi_world();
  Buffer buf(DType::kFloat32, 4);
  EXPECT_THROW(world->broadcast(buf.view(), 1)->wait(), InvalidArgument);
  EXPECT_THROW(world->send(buf.view(), 1, 0)->wait(), InvalidArgument);
  EXPECT_THROW(world->all_gather_v(buf.view(), buf.view(), {2, 2})->wait(), InvalidArgument);
  EXPECT_THROW(world->all_reduce(TensorView{nullptr, 4, DType::kFloat32}, ReduceOp::kSum)->wait(),
               InvalidArgument);

  const ParallelGroups g = make_parallel_groups(world, ParallelSizes{.dp = 0});
  EXPECT_EQ(g.sizes.dp, 1);
  for (const auto& group : {g.world, g.data_parallel, g.tensor_parallel, g.pipeline_parallel,
                            g.expert_parallel, g.expert_data_parallel, g.expert_tensor_parallel}) {
    ASSERT_NE(group, nullptr);
    EXPECT_EQ(group->size(), 1);
    group->barrier()->wait();
  }
  EXPECT_EQ(g.tensor_parallel->name(), "tensor_parallel[0]");
  EXPECT_THROW(make_parallel_groups(world, ParallelSizes{.tp = 2, .dp = 0}), InvalidArgument);
  EXPECT_EQ(split_group(world, -1, 0, "nobody"), nullptr);
}

TEST(WorldOfOne, RunRankMainReturnsTwoOnErrorInAWorldOfOne) {
  init_mpi_world();
  EXPECT_EQ(run_rank_main([] { return 7; }), 7);
  ::testing::internal::CaptureStderr();
  const int rc = run_rank_main([]() -> int { throw ConfigError("bad field `lr`"); });
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(rc, 2);
  EXPECT_NE(err.find("bad field `lr`"), std::string::npos) << err;
}

}  // namespace
}  // namespace shardwise
