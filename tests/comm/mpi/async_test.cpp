// Asynchrony and errors: operations run in issue order on the group's worker while the caller
// computes; errors found at issue time or on the worker come back from Work::wait.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "comm/comm_test_data.hpp"
#include "shardwise/comm/mpi_process_group.hpp"

namespace shardwise {
namespace {

using testing_comm::Buffer;
using testing_comm::rank_data;
using testing_comm::reference_reduce;

class Async : public ::testing::Test {
 protected:
  ProcessGroupPtr world = init_mpi_world();
  int p = world->size();
  int me = world->rank();
};

TEST_F(Async, ManyOpsInFlightWhileComputingThenWaitInOrder) {
  const std::int64_t n = std::int64_t{1} << 18;
  std::vector<Buffer> reduced;
  for (int i = 0; i < 3; ++i) reduced.push_back(rank_data(DType::kFloat32, 800 + i, me, n));
  Buffer rs_in = rank_data(DType::kBFloat16, 810, me, p * 1024);
  Buffer rs_out(DType::kBFloat16, 1024);
  Buffer ag_in = rank_data(DType::kFloat16, 811, me, 2048);
  Buffer ag_out(DType::kFloat16, p * 2048);
  // The same buffer reduced twice without waiting in between: only issue order gives p * sum.
  Buffer twice = rank_data(DType::kInt64, 812, me, 333);

  std::vector<WorkPtr> works;
  for (auto& b : reduced) works.push_back(world->all_reduce(b.view(), ReduceOp::kSum));
  works.push_back(world->reduce_scatter(rs_out.view(), rs_in.view(), ReduceOp::kAvg));
  works.push_back(world->all_gather(ag_out.view(), ag_in.view()));
  works.push_back(world->all_reduce(twice.view(), ReduceOp::kSum));
  works.push_back(world->all_reduce(twice.view(), ReduceOp::kSum));

  // Compute on the calling thread while the worker communicates.
  std::vector<double> x(1 << 20);
  std::iota(x.begin(), x.end(), 0.0);
  double acc = 0;
  for (int pass = 0; pass < 4; ++pass) {
    for (double v : x) acc += std::sqrt(v + pass);
  }
  EXPECT_GT(acc, 0.0);

  for (auto& w : works) {
    w->wait();
    EXPECT_TRUE(w->is_completed());
  }
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(reduced[static_cast<std::size_t>(i)].same_bits(
        reference_reduce(DType::kFloat32, ReduceOp::kSum, 800 + i, p, 0, n)))
        << "all_reduce " << i;
  }
  EXPECT_TRUE(rs_out.same_bits(
      reference_reduce(DType::kBFloat16, ReduceOp::kAvg, 810, p, me * 1024, 1024)));
  Buffer ag_expected(DType::kFloat16, p * 2048);
  for (int r = 0; r < p; ++r) testing_comm::fill_rank_data(ag_expected, 811, r, 0, 2048, r * 2048);
  EXPECT_TRUE(ag_out.same_bits(ag_expected));
  const Buffer once = reference_reduce(DType::kInt64, ReduceOp::kSum, 812, p, 0, 333);
  for (std::int64_t i = 0; i < 333; ++i) {
    std::int64_t got = 0;
    std::int64_t want = 0;
    std::memcpy(&got, twice.bytes.data() + 8 * i, 8);
    std::memcpy(&want, once.bytes.data() + 8 * i, 8);
    ASSERT_EQ(got, want * p) << "element " << i;
  }
}

TEST_F(Async, IssueTimeErrorsAreRethrownByWait) {
  Buffer in(DType::kFloat32, 10 * p + 1);
  Buffer out(DType::kFloat32, 10);
  WorkPtr bad_sizes = world->reduce_scatter(out.view(), in.view(), ReduceOp::kSum);
  EXPECT_TRUE(bad_sizes->is_completed());
  EXPECT_THROW(bad_sizes->wait(), InvalidArgument);
  EXPECT_THROW(bad_sizes->wait(), InvalidArgument);  // every wait rethrows

  try {
    world->reduce_scatter(out.view(), in.view(), ReduceOp::kSum)->wait();
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("reduce_scatter on group world"), std::string::npos)
        << e.what();
  }

  Buffer bytes(DType::kUInt8, 8);
  EXPECT_THROW(world->all_reduce(bytes.view(), ReduceOp::kSum)->wait(), InvalidArgument);
  Buffer ints(DType::kInt32, 8);
  EXPECT_THROW(world->all_reduce(ints.view(), ReduceOp::kAvg)->wait(), InvalidArgument);
  Buffer half(DType::kFloat16, 10);
  EXPECT_THROW(world->all_gather(half.view(), out.view())->wait(), InvalidArgument);  // dtypes
  EXPECT_THROW(world->broadcast(out.view(), p)->wait(), InvalidArgument);
  EXPECT_THROW(world->send(out.view(), -1, 0)->wait(), InvalidArgument);
  EXPECT_THROW(world->recv(out.view(), 0, -3)->wait(), InvalidArgument);
  // Output overlapping the input somewhere other than this rank's shard.
  Buffer whole(DType::kFloat32, 4 * p);
  const std::int64_t wrong = me == 0 ? 1 : 0;
  EXPECT_THROW(world->reduce_scatter(whole.slice(wrong, 4), whole.view(), ReduceOp::kSum)->wait(),
               InvalidArgument);
  EXPECT_THROW(
      world->all_gather_v(whole.view(), whole.slice(0, 4), std::vector<std::int64_t>(1, 4 * p))
          ->wait(),
      InvalidArgument);

  // Nothing was sent: the group is still in step.
  Buffer sum(DType::kInt32, 1);
  testing_comm::store_integer(DType::kInt32, sum.bytes.data(), 0, 1);
  world->all_reduce(sum.view(), ReduceOp::kSum)->wait();
  std::int32_t got = 0;
  std::memcpy(&got, sum.bytes.data(), 4);
  EXPECT_EQ(got, p);
}

TEST_F(Async, WorkerErrorsAreRethrownByWait) {
  if (p < 2) GTEST_SKIP() << "needs two ranks";
  // Rank 0 sends 8 floats where rank 1 expects 4 (truncation in MPI), then 4 where rank 1
  // expects 8 (short message): both fail on rank 1's wait with CommError.
  Buffer eight = rank_data(DType::kFloat32, 900, me, 8);
  Buffer four = rank_data(DType::kFloat32, 901, me, 4);
  if (me == 0) {
    world->send(eight.view(), 1, 11)->wait();
    world->send(four.view(), 1, 12)->wait();
  } else if (me == 1) {
    WorkPtr truncated = world->recv(four.view(), 0, 11);
    EXPECT_THROW(truncated->wait(), CommError);
    EXPECT_TRUE(truncated->is_completed());
    WorkPtr short_message = world->recv(eight.view(), 0, 12);
    try {
      short_message->wait();
      FAIL() << "no error for a short message";
    } catch (const CommError& e) {
      EXPECT_NE(std::string(e.what()).find("expected 8 fp32 elements, received 4"),
                std::string::npos)
          << e.what();
    }
  }
  world->barrier()->wait();
}

}  // namespace
}  // namespace shardwise
