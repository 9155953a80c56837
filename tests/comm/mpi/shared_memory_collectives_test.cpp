// Collectives through the group's shared-memory segment (CollectiveAlgorithm::kSharedMemory):
// reduce_scatter, all_gather and all_reduce equal the reference bit for bit for fp32, bf16 and
// integer types, odd sizes and sizes spanning many 1 MiB halves (several rounds of the double
// buffer); reductions run in rank order (the same bits as the direct exchange on data whose sum
// depends on the order); large all-gathers equal it with and without the opt-in single copy
// (process_vm_readv); reduce_scatter_scaled equals scaling in place first; and a group whose
// shm_open fails on one rank falls back to the direct exchange on every rank.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>

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

// The test hook of shared_memory_collectives.hpp: a group rank whose shm_open "fails".
constexpr const char* kFailShmOpen = "SHARDWISE_TEST_FAIL_SHM_OPEN";

ProcessGroupPtr group_with(CollectiveAlgorithm algorithm, const std::string& name) {
  ProcessGroupPtr world = init_mpi_world();
  ProcessGroupPtr group = split_group(world, 0, world->rank(), name);
  set_process_group_options(group, {kDefaultCommTimeoutSeconds, algorithm});
  return group;
}

// Shards of 1 and 313 elements (odd), and 300001 (1.2 MB of fp32: two rounds of the 1 MiB halves
// at 2 ranks, four at 4, the last one partial), for fp32 SUM and bf16 SUM / AVG only (speed).
bool skip_large(std::int64_t shard, const testing_comm::ReductionCase& c) {
  return shard > 1000 && !(c.op == ReduceOp::kSum && c.dtype == DType::kFloat32) &&
         c.dtype != DType::kBFloat16;
}

void check_reduce_scatter(const ProcessGroupPtr& group, const char* what) {
  const int p = group->size();
  const int me = group->rank();
  std::uint64_t seed = 7000;
  for (std::int64_t shard : {1, 313, 300001}) {
    for (const auto& c : kReductionCases) {
      ++seed;
      if (skip_large(shard, c)) continue;
      const std::string label =
          std::string(what) + " " + op_label(c.dtype, c.op) + " shard " + std::to_string(shard);
      const Buffer expected = reference_reduce(c.dtype, c.op, seed, p, me * shard, shard);
      Buffer input = rank_data(c.dtype, seed, me, p * shard);
      const Buffer input_before = input;
      Buffer output(c.dtype, shard);
      group->reduce_scatter(output.view(), input.view(), c.op)->wait();
      ASSERT_TRUE(output.same_bits(expected)) << "out of place " << label;
      EXPECT_TRUE(input.same_bits(input_before)) << "input modified " << label;
      EXPECT_EQ(output.bytes.back(), std::byte{0xAB}) << "wrote past the output " << label;

      group->reduce_scatter(input.slice(me * shard, shard), input.view(), c.op)->wait();
      Buffer got(c.dtype, shard);
      std::memcpy(got.bytes.data(), input.slice(me * shard, shard).data, got.bytes.size() - 1);
      EXPECT_TRUE(got.same_bits(expected)) << "in place " << label;
    }
  }
}

void check_all_gather(const ProcessGroupPtr& group, const char* what) {
  const int p = group->size();
  const int me = group->rank();
  std::uint64_t seed = 8000;
  // 2097153 fp32 (8 MiB + 4 bytes per shard): outputs past kStreamingCopyMinBytes, written with
  // streaming stores, with a shard that is not a multiple of their 64-byte step.
  for (std::int64_t shard : {0, 1, 129, 300001, 2097153}) {
    for (DType dtype : {DType::kFloat32, DType::kBFloat16, DType::kUInt8, DType::kInt64}) {
      ++seed;
      if (shard > 1000 && dtype == DType::kInt64) continue;
      if (shard > 1000000 && dtype != DType::kFloat32) continue;
      const std::string label = std::string(what) + " " + std::string(dtype_name(dtype)) +
                                " shard " + std::to_string(shard);
      Buffer expected(dtype, p * shard);
      for (int r = 0; r < p; ++r) fill_rank_data(expected, seed, r, 0, shard, r * shard);
      const Buffer input = rank_data(dtype, seed, me, shard);
      Buffer output(dtype, p * shard);
      group->all_gather(output.view(), const_cast<Buffer&>(input).view())->wait();
      ASSERT_TRUE(output.same_bits(expected)) << "out of place " << label;
      EXPECT_EQ(output.bytes.back(), std::byte{0xAB}) << "wrote past the output " << label;

      Buffer in_place(dtype, p * shard);  // other shards hold junk (0xAB)
      fill_rank_data(in_place, seed, me, 0, shard, me * shard);
      group->all_gather(in_place.view(), in_place.slice(me * shard, shard))->wait();
      EXPECT_TRUE(in_place.same_bits(expected)) << "in place " << label;
    }
  }
}

void check_all_reduce(const ProcessGroupPtr& group, const char* what) {
  const int p = group->size();
  const int me = group->rank();
  std::uint64_t seed = 9000;
  // 1025 fp32 = 4100 bytes: just above the size from which kAuto uses the segment.
  for (std::int64_t numel : {1, 7, 1025, 600001}) {
    for (const auto& c : kReductionCases) {
      ++seed;
      if (skip_large(numel / p, c)) continue;
      const std::string label =
          std::string(what) + " " + op_label(c.dtype, c.op) + " numel " + std::to_string(numel);
      const Buffer expected = reference_reduce(c.dtype, c.op, seed, p, 0, numel);
      Buffer buffer = rank_data(c.dtype, seed, me, numel);
      group->all_reduce(buffer.view(), c.op)->wait();
      ASSERT_TRUE(buffer.same_bits(expected)) << label;
      EXPECT_EQ(buffer.bytes.back(), std::byte{0xAB}) << "wrote past the buffer " << label;
    }
  }
}

TEST(SharedMemoryCollectives, AreUsedByGroupsOnOneNodeAndMatchTheReference) {
  ProcessGroupPtr group = group_with(CollectiveAlgorithm::kSharedMemory, "shm");
  EXPECT_FALSE(uses_shared_memory_collectives(group));  // set up on first use only
  check_reduce_scatter(group, "shared memory");
  EXPECT_TRUE(uses_shared_memory_collectives(group));
  EXPECT_FALSE(uses_single_copy_all_gather(group));  // opt-in only
  check_all_gather(group, "shared memory");
  check_all_reduce(group, "shared memory");
}

// With the single copy on, large all-gathers read the peers' shards from their memory (same
// user, no ptrace policy in the way here) and give the same bits.
TEST(SharedMemoryCollectives, SingleCopyAllGatherMatchesTheReference) {
  ::setenv("SHARDWISE_SINGLE_COPY", "1", 1);
  ProcessGroupPtr group = group_with(CollectiveAlgorithm::kSharedMemory, "shm-single-copy");
  check_all_gather(group, "single copy");
  ::unsetenv("SHARDWISE_SINGLE_COPY");
  EXPECT_TRUE(uses_single_copy_all_gather(group));
}

TEST(SharedMemoryCollectives, AutoUsesThemFrom4KiBOnly) {
  ProcessGroupPtr group = group_with(CollectiveAlgorithm::kAuto, "shm-auto");
  std::vector<float> small(static_cast<std::size_t>(16 * group->size()), 1.0f);
  std::vector<float> shard(16);
  group
      ->reduce_scatter({shard.data(), 16, DType::kFloat32},
                       {small.data(), 16 * group->size(), DType::kFloat32}, ReduceOp::kSum)
      ->wait();
  EXPECT_FALSE(uses_shared_memory_collectives(group));  // 64-byte shards go through MPI
  check_reduce_scatter(group, "auto");
  EXPECT_TRUE(uses_shared_memory_collectives(group));
}

// Data whose fp32 sum depends on the order of the adds.
using testing_comm::order_sensitive_value;

std::vector<float> order_sensitive_input(int rank, std::int64_t n) {
  std::vector<float> input(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i)
    input[static_cast<std::size_t>(i)] = order_sensitive_value(rank, i);
  return input;
}

TEST(SharedMemoryCollectives, ReduceInRankOrderAsTheDirectExchangeDoes) {
  ProcessGroupPtr shm = group_with(CollectiveAlgorithm::kSharedMemory, "shm-order");
  ProcessGroupPtr direct = group_with(CollectiveAlgorithm::kDirect, "direct-order");
  const int p = shm->size();
  const int me = shm->rank();
  const std::int64_t shard = 300001;  // several rounds and reduction blocks
  const std::vector<float> input = order_sensitive_input(me, p * shard);
  std::vector<float> via_shm(static_cast<std::size_t>(shard));
  std::vector<float> via_direct(static_cast<std::size_t>(shard));
  const TensorView in{const_cast<float*>(input.data()), p * shard, DType::kFloat32};
  shm->reduce_scatter({via_shm.data(), shard, DType::kFloat32}, in, ReduceOp::kSum)->wait();
  direct->reduce_scatter({via_direct.data(), shard, DType::kFloat32}, in, ReduceOp::kSum)->wait();
  ASSERT_TRUE(uses_shared_memory_collectives(shm));
  EXPECT_EQ(std::memcmp(via_shm.data(), via_direct.data(), via_shm.size() * 4), 0);
  for (std::int64_t j = 0; j < shard; j += 997) {
    const std::int64_t i = me * shard + j;
    float acc = order_sensitive_value(0, i);
    for (int r = 1; r < p; ++r) acc += order_sensitive_value(r, i);
    ASSERT_EQ(via_shm[static_cast<std::size_t>(j)], acc) << "element " << j;
  }

  // all_reduce: every element reduced in rank order too.
  std::vector<float> all = order_sensitive_input(me, 500003);
  shm->all_reduce({all.data(), 500003, DType::kFloat32}, ReduceOp::kSum)->wait();
  for (std::int64_t i = 0; i < 500003; i += 991) {
    float acc = order_sensitive_value(0, i);
    for (int r = 1; r < p; ++r) acc += order_sensitive_value(r, i);
    ASSERT_EQ(all[static_cast<std::size_t>(i)], acc) << "all_reduce element " << i;
  }
}

TEST(SharedMemoryCollectives, ScaledReduceScatterEqualsScalingInPlaceFirst) {
  ProcessGroupPtr shm = group_with(CollectiveAlgorithm::kSharedMemory, "shm-scaled");
  ProcessGroupPtr direct = group_with(CollectiveAlgorithm::kDirect, "direct-scaled");
  const int p = shm->size();
  const int me = shm->rank();
  const double scale = 1.0 / 3.0;  // rounds: the product is not exact
  for (std::int64_t shard : {1, 4099, 300001}) {
    std::vector<float> input = order_sensitive_input(me, p * shard);
    std::vector<float> scaled_in_place = input;
    std::vector<float> got(static_cast<std::size_t>(shard));
    std::vector<float> want(static_cast<std::size_t>(shard));
    // In place, as DDP does: output is this rank's shard of the input.
    shm->reduce_scatter_scaled({input.data() + me * shard, shard, DType::kFloat32},
                               {input.data(), p * shard, DType::kFloat32}, scale)
        ->wait();
    std::memcpy(got.data(), input.data() + me * shard, got.size() * 4);
    // The direct group takes the default path: scale in place, then reduce-scatter.
    direct
        ->reduce_scatter_scaled({want.data(), shard, DType::kFloat32},
                                {scaled_in_place.data(), p * shard, DType::kFloat32}, scale)
        ->wait();
    EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0) << "shard " << shard;
    const float f = static_cast<float>(scale);
    for (std::int64_t j = 0; j < shard; j += 101) {
      const std::int64_t i = me * shard + j;
      float acc = order_sensitive_value(0, i) * f;
      for (int r = 1; r < p; ++r) acc += order_sensitive_value(r, i) * f;
      ASSERT_EQ(got[static_cast<std::size_t>(j)], acc) << "shard " << shard << " element " << j;
    }
  }
  std::vector<std::uint16_t> bf16(static_cast<std::size_t>(p));
  std::uint16_t out = 0;
  EXPECT_THROW(shm->reduce_scatter_scaled({&out, 1, DType::kBFloat16},
                                          {bf16.data(), p, DType::kBFloat16}, 0.5)
                   ->wait(),
               InvalidArgument);
}

TEST(SharedMemoryCollectives, AFailedShmOpenOnOneRankFallsBackOnEveryRank) {
  ProcessGroupPtr world = init_mpi_world();
  // The last rank's shm_open fails (rank 0 creates the segment; another rank only opens it).
  ::setenv(kFailShmOpen, std::to_string(world->size() - 1).c_str(), 1);
  ProcessGroupPtr group = group_with(CollectiveAlgorithm::kSharedMemory, "shm-fallback");
  check_reduce_scatter(group, "fallback");
  ::unsetenv(kFailShmOpen);
  EXPECT_FALSE(uses_shared_memory_collectives(group));
  check_all_gather(group, "fallback");
  check_all_reduce(group, "fallback");
  EXPECT_FALSE(uses_shared_memory_collectives(group));

  // Rank 0 failing to create it is the same.
  ::setenv(kFailShmOpen, "0", 1);
  ProcessGroupPtr other = group_with(CollectiveAlgorithm::kAuto, "shm-fallback-0");
  check_reduce_scatter(other, "fallback (rank 0)");
  ::unsetenv(kFailShmOpen);
  EXPECT_FALSE(uses_shared_memory_collectives(other));
}

}  // namespace
}  // namespace shardwise
