// reduce_scatter and all_gather through every algorithm (ring and direct over send/recv, MPI's
// own, the shared-memory segment, and the automatic choice), forced per group: results equal the
// reference bit for bit for every dtype and op, in and out of place, for empty, odd and multi-piece
// shards; the ring's and the direct exchange's reduction orders are the documented ones.
#include <gtest/gtest.h>

#include <cmath>

#include "comm/comm_test_data.hpp"
#include "shardwise/comm/mpi_process_group.hpp"

namespace shardwise {
namespace {

using testing_comm::Buffer;
using testing_comm::fill_rank_data;
using testing_comm::kReductionCases;
using testing_comm::op_label;
using testing_comm::rank_data;
using testing_comm::reference_reduce;

class RingAndMpi : public ::testing::TestWithParam<CollectiveAlgorithm> {
 protected:
  void SetUp() override {
    ProcessGroupPtr world = init_mpi_world();
    group = split_group(world, 0, world->rank(), "algo");
    ProcessGroupOptions options = process_group_options(group);
    options.collective_algorithm = GetParam();
    set_process_group_options(group, options);
    p = group->size();
    me = group->rank();
  }
  ProcessGroupPtr group;
  int p = 1;
  int me = 0;
};

TEST_P(RingAndMpi, ReduceScatterMatchesReferenceInAndOutOfPlace) {
  std::uint64_t seed = 4000;
  // 0: empty; 1 and 313: odd; 300000 fp32 = 1.2 MB: more than one ring piece (fp32 and bf16
  // only, to keep the test fast).
  for (std::int64_t shard : {0, 1, 313, 300000}) {
    for (const auto& c : kReductionCases) {
      ++seed;
      if (shard > 1000 && c.op != ReduceOp::kSum && c.dtype != DType::kBFloat16) continue;
      const std::string label = op_label(c.dtype, c.op) + " shard " + std::to_string(shard);
      const Buffer expected = reference_reduce(c.dtype, c.op, seed, p, me * shard, shard);
      Buffer input = rank_data(c.dtype, seed, me, p * shard);
      Buffer input_before = input;
      Buffer output(c.dtype, shard);
      group->reduce_scatter(output.view(), input.view(), c.op)->wait();
      EXPECT_TRUE(output.same_bits(expected)) << "out of place " << label;
      EXPECT_TRUE(input.same_bits(input_before)) << "input modified " << label;
      EXPECT_EQ(output.bytes.back(), std::byte{0xAB}) << "wrote past the output " << label;

      group->reduce_scatter(input.slice(me * shard, shard), input.view(), c.op)->wait();
      for (int r = 0; r < p; ++r) {
        Buffer got(c.dtype, shard);
        std::memcpy(got.bytes.data(), input.slice(r * shard, shard).data, got.bytes.size() - 1);
        Buffer want(c.dtype, shard);
        std::memcpy(want.bytes.data(), input_before.slice(r * shard, shard).data,
                    want.bytes.size() - 1);
        EXPECT_TRUE(got.same_bits(r == me ? expected : want))
            << "in place, shard " << r << " " << label;
      }
    }
  }
}

TEST_P(RingAndMpi, AllGatherMatchesReferenceInAndOutOfPlace) {
  std::uint64_t seed = 5000;
  for (std::int64_t shard : {0, 1, 129, 300000}) {
    for (DType dtype : {DType::kFloat32, DType::kBFloat16, DType::kUInt8, DType::kInt64}) {
      ++seed;
      if (shard > 1000 && dtype != DType::kFloat32) continue;  // 1.2 MB: several ring pieces
      const std::string label = std::string(dtype_name(dtype)) + " shard " + std::to_string(shard);
      Buffer expected(dtype, p * shard);
      for (int r = 0; r < p; ++r) fill_rank_data(expected, seed, r, 0, shard, r * shard);
      Buffer input = rank_data(dtype, seed, me, shard);
      Buffer output(dtype, p * shard);
      group->all_gather(output.view(), input.view())->wait();
      EXPECT_TRUE(output.same_bits(expected)) << "out of place " << label;
      EXPECT_EQ(output.bytes.back(), std::byte{0xAB}) << "wrote past the output " << label;

      Buffer in_place(dtype, p * shard);  // other shards hold junk (0xAB)
      fill_rank_data(in_place, seed, me, 0, shard, me * shard);
      group->all_gather(in_place.view(), in_place.slice(me * shard, shard))->wait();
      EXPECT_TRUE(in_place.same_bits(expected)) << "in place " << label;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Algorithms, RingAndMpi,
                         ::testing::Values(CollectiveAlgorithm::kRing, CollectiveAlgorithm::kDirect,
                                           CollectiveAlgorithm::kMpi,
                                           CollectiveAlgorithm::kSharedMemory,
                                           CollectiveAlgorithm::kAuto),
                         [](const auto& info) -> std::string {
                           switch (info.param) {
                             case CollectiveAlgorithm::kRing:
                               return "Ring";
                             case CollectiveAlgorithm::kDirect:
                               return "Direct";
                             case CollectiveAlgorithm::kMpi:
                               return "Mpi";
                             case CollectiveAlgorithm::kSharedMemory:
                               return "SharedMemory";
                             default:
                               return "Auto";
                           }
                         });

// Data whose fp32 sums depend on the order of the adds; reduce-scatter with `algorithm`.
std::vector<float> order_sensitive_reduce_scatter(CollectiveAlgorithm algorithm, std::int64_t shard,
                                                  float (*value)(int, std::int64_t)) {
  ProcessGroupPtr world = init_mpi_world();
  ProcessGroupPtr group = split_group(world, 0, world->rank(), "order");
  set_process_group_options(group, {kDefaultCommTimeoutSeconds, algorithm});
  const int p = group->size();
  std::vector<float> input(static_cast<std::size_t>(p * shard));
  for (std::int64_t i = 0; i < p * shard; ++i) {
    input[static_cast<std::size_t>(i)] = value(group->rank(), i);
  }
  std::vector<float> output(static_cast<std::size_t>(shard));
  group
      ->reduce_scatter({output.data(), shard, DType::kFloat32},
                       {input.data(), p * shard, DType::kFloat32}, ReduceOp::kSum)
      ->wait();
  return output;
}

using testing_comm::order_sensitive_value;

TEST(DirectReduceScatter, ReducesInRankOrder) {
  ProcessGroupPtr world = init_mpi_world();
  const int p = world->size();
  const int me = world->rank();
  const std::int64_t shard = 20000;  // more than one reduction block
  const std::vector<float> output =
      order_sensitive_reduce_scatter(CollectiveAlgorithm::kDirect, shard, order_sensitive_value);
  for (std::int64_t j = 0; j < shard; ++j) {
    const std::int64_t i = me * shard + j;
    float acc = order_sensitive_value(0, i);
    for (int r = 1; r < p; ++r) acc += order_sensitive_value(r, i);
    ASSERT_EQ(output[static_cast<std::size_t>(j)], acc) << "element " << j;
  }
}

TEST(RingReduceScatter, ReducesInTheDocumentedRingOrder) {
  // Shard c must equal ((x[c+1] + x[c+2]) + ...) + x[c], ranks mod p, rounded at each add.
  ProcessGroupPtr world = init_mpi_world();
  const int p = world->size();
  const int me = world->rank();
  const std::int64_t shard = 1000;
  const std::vector<float> output =
      order_sensitive_reduce_scatter(CollectiveAlgorithm::kRing, shard, order_sensitive_value);
  for (std::int64_t j = 0; j < shard; ++j) {
    const std::int64_t i = me * shard + j;
    float acc = order_sensitive_value((me + 1) % p, i);
    for (int k = 2; k <= p; ++k) acc += order_sensitive_value((me + k) % p, i);
    ASSERT_EQ(output[static_cast<std::size_t>(j)], acc) << "element " << j;
  }
}

}  // namespace
}  // namespace shardwise
