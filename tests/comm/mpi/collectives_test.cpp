// Results of every collective equal a reference computed locally from every rank's generated
// input, bit for bit, for fp32/bf16/fp16 (and integer types where supported), SUM/AVG/MAX, in the
// out-of-place and in-place forms.
#include <gtest/gtest.h>

#include "comm/comm_test_data.hpp"
#include "shardwise/comm/mpi_process_group.hpp"

namespace shardwise {
namespace {

using testing_comm::Buffer;
using testing_comm::fill_rank_data;
using testing_comm::op_label;
using testing_comm::rank_data;
using testing_comm::reference_reduce;

constexpr DType kFloatTypes[] = {DType::kFloat32, DType::kBFloat16, DType::kFloat16};
constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax};

class Collectives : public ::testing::Test {
 protected:
  ProcessGroupPtr world = init_mpi_world();
  int p = world->size();
  int me = world->rank();
};

TEST_F(Collectives, AllReduceMatchesReference) {
  const std::int64_t n = 1237;  // not a multiple of any group size
  std::uint64_t seed = 100;
  for (DType dtype : kFloatTypes) {
    for (ReduceOp op : kOps) {
      Buffer buf = rank_data(dtype, ++seed, me, n);
      world->all_reduce(buf.view(), op)->wait();
      EXPECT_TRUE(buf.same_bits(reference_reduce(dtype, op, seed, p, 0, n))) << op_label(dtype, op);
    }
  }
  for (DType dtype : {DType::kInt32, DType::kInt64}) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax}) {
      Buffer buf = rank_data(dtype, ++seed, me, n);
      world->all_reduce(buf.view(), op)->wait();
      EXPECT_TRUE(buf.same_bits(reference_reduce(dtype, op, seed, p, 0, n))) << op_label(dtype, op);
    }
  }
}

TEST_F(Collectives, ReduceScatterOutOfPlaceAndInPlace) {
  const std::int64_t shard = 311;
  std::uint64_t seed = 200;
  for (DType dtype : kFloatTypes) {
    for (ReduceOp op : kOps) {
      ++seed;
      const Buffer expected = reference_reduce(dtype, op, seed, p, me * shard, shard);
      Buffer input = rank_data(dtype, seed, me, p * shard);
      Buffer input_before = input;
      Buffer output(dtype, shard);
      world->reduce_scatter(output.view(), input.view(), op)->wait();
      EXPECT_TRUE(output.same_bits(expected)) << "out of place " << op_label(dtype, op);
      EXPECT_TRUE(input.same_bits(input_before)) << "input modified " << op_label(dtype, op);

      // In place: the output is this rank's shard of the input; other shards stay as they were.
      world->reduce_scatter(input.slice(me * shard, shard), input.view(), op)->wait();
      Buffer own(dtype, shard);
      std::memcpy(own.bytes.data(), input.slice(me * shard, shard).data, own.bytes.size() - 1);
      EXPECT_TRUE(own.same_bits(expected)) << "in place " << op_label(dtype, op);
      for (int r = 0; r < p; ++r) {
        if (r == me) continue;
        EXPECT_EQ(std::memcmp(input.slice(r * shard, shard).data,
                              input_before.slice(r * shard, shard).data,
                              static_cast<std::size_t>(shard) * dtype_size(dtype)),
                  0)
            << "in place clobbered shard " << r << " " << op_label(dtype, op);
      }
    }
  }
}

TEST_F(Collectives, Bf16SumAccumulatesInFp32) {
  // The reference sums in fp32 and rounds once; rounding to bf16 after each pairwise add (what a
  // 16-bit MPI op would do) differs on this data once three or more ranks contribute.
  const std::int64_t n = 4096;
  const std::uint64_t seed = 77;
  Buffer buf = rank_data(DType::kBFloat16, seed, me, n);
  world->all_reduce(buf.view(), ReduceOp::kSum)->wait();
  const Buffer expected = reference_reduce(DType::kBFloat16, ReduceOp::kSum, seed, p, 0, n);
  EXPECT_TRUE(buf.same_bits(expected));
  if (p >= 3) {
    std::int64_t differs = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      float acc =
          round_to_bf16(static_cast<float>(testing_comm::value_at(DType::kBFloat16, seed, 0, i)));
      for (int r = 1; r < p; ++r) {
        acc = round_to_bf16(
            acc + static_cast<float>(testing_comm::value_at(DType::kBFloat16, seed, r, i)));
      }
      std::uint16_t got = 0;
      std::memcpy(&got, buf.bytes.data() + 2 * i, 2);
      differs += float_to_bf16(acc) != got;
    }
    EXPECT_GT(differs, 0) << "test data cannot tell fp32 accumulation from bf16 pairwise adds";
  }
}

TEST_F(Collectives, AllGatherEveryDtypeOutOfPlaceAndInPlace) {
  const std::int64_t shard = 129;
  std::uint64_t seed = 300;
  for (DType dtype : kAllDTypes) {
    ++seed;
    Buffer expected(dtype, p * shard);
    for (int r = 0; r < p; ++r) fill_rank_data(expected, seed, r, 0, shard, r * shard);
    Buffer input = rank_data(dtype, seed, me, shard);
    Buffer output(dtype, p * shard);
    world->all_gather(output.view(), input.view())->wait();
    EXPECT_TRUE(output.same_bits(expected)) << "out of place " << dtype_name(dtype);

    Buffer in_place(dtype, p * shard);  // other shards hold junk (0xAB)
    fill_rank_data(in_place, seed, me, 0, shard, me * shard);
    world->all_gather(in_place.view(), in_place.slice(me * shard, shard))->wait();
    EXPECT_TRUE(in_place.same_bits(expected)) << "in place " << dtype_name(dtype);
  }
}

TEST_F(Collectives, AllGatherVUnevenCountsIncludingZero) {
  std::vector<std::int64_t> counts;
  for (int r = 0; r < p; ++r) counts.push_back(r == 1 ? 0 : 5 + 7 * r);
  std::vector<std::int64_t> displs(1, 0);
  for (int r = 0; r < p; ++r) displs.push_back(displs.back() + counts[static_cast<std::size_t>(r)]);
  const std::int64_t total = displs.back();
  const std::int64_t mine = counts[static_cast<std::size_t>(me)];
  std::uint64_t seed = 400;
  for (DType dtype : kAllDTypes) {
    ++seed;
    Buffer expected(dtype, total);
    for (int r = 0; r < p; ++r) {
      fill_rank_data(expected, seed, r, 0, counts[static_cast<std::size_t>(r)],
                     displs[static_cast<std::size_t>(r)]);
    }
    Buffer input = rank_data(dtype, seed, me, mine);
    Buffer output(dtype, total);
    world->all_gather_v(output.view(), input.view(), counts)->wait();
    EXPECT_TRUE(output.same_bits(expected)) << "out of place " << dtype_name(dtype);

    Buffer in_place(dtype, total);
    fill_rank_data(in_place, seed, me, 0, mine, displs[static_cast<std::size_t>(me)]);
    world
        ->all_gather_v(in_place.view(), in_place.slice(displs[static_cast<std::size_t>(me)], mine),
                       counts)
        ->wait();
    EXPECT_TRUE(in_place.same_bits(expected)) << "in place " << dtype_name(dtype);
  }
}

TEST_F(Collectives, BroadcastFromEveryRoot) {
  const std::int64_t n = 1000;
  std::uint64_t seed = 500;
  for (DType dtype : kAllDTypes) {
    ++seed;
    for (int root = 0; root < p; ++root) {
      Buffer buf = rank_data(dtype, seed, me, n);  // differs per rank before the broadcast
      world->broadcast(buf.view(), root)->wait();
      EXPECT_TRUE(buf.same_bits(rank_data(dtype, seed, root, n)))
          << dtype_name(dtype) << " root " << root;
    }
  }
}

TEST_F(Collectives, SendRecvRingSmallAndLarge) {
  // Every rank posts a send to its successor and a receive from its predecessor, then waits: a
  // symmetric exchange that deadlocks if sends block the ordered queue. 1M floats goes past
  // Open MPI's eager limit.
  const int next = (me + 1) % p;
  const int prev = (me + p - 1) % p;
  std::uint64_t seed = 600;
  for (std::int64_t n : {std::int64_t{17}, std::int64_t{1} << 20}) {
    for (DType dtype : kAllDTypes) {
      ++seed;
      Buffer out = rank_data(dtype, seed, me, n);
      Buffer in(dtype, n);
      WorkPtr s = world->send(out.view(), next, 5);
      WorkPtr r = world->recv(in.view(), prev, 5);
      r->wait();
      s->wait();
      EXPECT_TRUE(in.same_bits(rank_data(dtype, seed, prev, n))) << dtype_name(dtype) << " " << n;
    }
  }
}

TEST_F(Collectives, RecvMatchesByTagNotIssueOrder) {
  const int next = (me + 1) % p;
  const int prev = (me + p - 1) % p;
  Buffer a = rank_data(DType::kInt32, 701, me, 64);
  Buffer b = rank_data(DType::kInt32, 702, me, 64);
  Buffer got_a(DType::kInt32, 64);
  Buffer got_b(DType::kInt32, 64);
  WorkPtr sa = world->send(a.view(), next, 1);
  WorkPtr sb = world->send(b.view(), next, 2);
  WorkPtr rb = world->recv(got_b.view(), prev, 2);  // posted before the tag-1 receive
  WorkPtr ra = world->recv(got_a.view(), prev, 1);
  rb->wait();
  ra->wait();
  sa->wait();
  sb->wait();
  EXPECT_TRUE(got_a.same_bits(rank_data(DType::kInt32, 701, prev, 64)));
  EXPECT_TRUE(got_b.same_bits(rank_data(DType::kInt32, 702, prev, 64)));
}

}  // namespace
}  // namespace shardwise
