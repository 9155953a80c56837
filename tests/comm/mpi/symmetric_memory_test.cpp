// Symmetric memory: allocation (shared under the shared-memory algorithm, private elsewhere or
// when a rank cannot map it, zeroed, same size on every rank; the rank that cannot map says why
// once per group), the in-place reduce-scatter, all-reduce and all-gather on it (the bits of the
// copying path and of the reference, at offsets inside the allocation, in and out of place, fp32
// pre-scaled), a rank whose input is not symmetric (CommError on every rank), and a rank that
// overwrites its input as soon as the call returns (the peers must have read it by then).
#include "shardwise/comm/symmetric_memory.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "comm/comm_test_data.hpp"
#include "shardwise/comm/mpi_process_group.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise {
namespace {

using testing_comm::order_sensitive_value;
using testing_comm::reference_reduce;
using testing_comm::value_at;

// shared_memory_collectives.hpp's kFailSharedMemoryEnv (that header is private to the backend).
constexpr const char* kFailSharedMemoryEnvForTests = "SHARDWISE_TEST_FAIL_SHM_OPEN";

ProcessGroupPtr group_with(CollectiveAlgorithm algorithm, const char* name) {
  ProcessGroupPtr world = init_mpi_world();
  ProcessGroupPtr group = split_group(world, 0, world->rank(), name);
  ProcessGroupOptions options = process_group_options(group);
  options.collective_algorithm = algorithm;
  set_process_group_options(group, options);
  return group;
}

// Rank `rank`'s generated elements [0, n) of `dtype` written at `at`.
void fill(std::byte* at, DType dtype, std::uint64_t seed, int rank, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    testing_comm::store(dtype, at, i, value_at(dtype, seed, rank, i));
  }
}

TEST(SymmetricMemory, SharedUnderSharedMemoryZeroedAlignedAndPrivateOtherwise) {
  ProcessGroupPtr group = group_with(CollectiveAlgorithm::kAuto, "sym_alloc");
  SymmetricMemoryPtr memory = allocate_symmetric_memory(group, 12345);
  EXPECT_TRUE(memory->shared());
  EXPECT_EQ(memory->bytes(), 12345u);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(memory->data()) % 4096, 0u);
  for (std::size_t i = 0; i < memory->bytes(); ++i) ASSERT_EQ(memory->data()[i], std::byte{0});

  ProcessGroupPtr direct = group_with(CollectiveAlgorithm::kDirect, "sym_direct");
  SymmetricMemoryPtr private_memory = allocate_symmetric_memory(direct, 4096);
  EXPECT_FALSE(private_memory->shared());
  EXPECT_EQ(private_memory->data()[4095], std::byte{0});
}

TEST(SymmetricMemory, ARankThatCannotMapTheSegmentGivesEveryRankPrivateMemory) {
  ProcessGroupPtr group = group_with(CollectiveAlgorithm::kAuto, "sym_fallback");
  const int p = group->size();
  const std::int64_t shard = 4096;
  std::vector<float> warm(static_cast<std::size_t>(p * shard), 1.0f);
  group->all_reduce({warm.data(), p * shard, DType::kFloat32}, ReduceOp::kSum)->wait();
  ASSERT_TRUE(uses_shared_memory_collectives(group));
  // The collectives' segment exists; now the last rank's shm_open fails.
  const std::string last = std::to_string(p - 1);
  ::setenv(kFailSharedMemoryEnvForTests, last.c_str(), 1);
  testing::internal::CaptureStderr();
  SymmetricMemoryPtr memory =
      allocate_symmetric_memory(group, static_cast<std::size_t>(p * shard) * sizeof(float));
  SymmetricMemoryPtr second = allocate_symmetric_memory(group, 4096);
  const std::string warnings = testing::internal::GetCapturedStderr();
  ::unsetenv(kFailSharedMemoryEnvForTests);
  EXPECT_FALSE(memory->shared());
  EXPECT_FALSE(second->shared());
  // The failing rank says why, once for the group however many allocations fall back.
  if (group->rank() == p - 1) {
    const std::string what = "unavailable (shm_open";
    const std::size_t first = warnings.find(what);
    EXPECT_NE(first, std::string::npos) << warnings;
    EXPECT_EQ(warnings.find(what, first + 1), std::string::npos) << warnings;
  }
  auto* data = reinterpret_cast<float*>(memory->data());
  std::fill_n(data, p * shard, static_cast<float>(group->rank() + 1));
  std::vector<float> output(static_cast<std::size_t>(shard));
  group
      ->reduce_scatter({output.data(), shard, DType::kFloat32}, {data, p * shard, DType::kFloat32},
                       ReduceOp::kSum)
      ->wait();
  EXPECT_EQ(output.front(), static_cast<float>(p * (p + 1) / 2));
  EXPECT_EQ(output.back(), static_cast<float>(p * (p + 1) / 2));
}

TEST(SymmetricMemory, SizesThatDifferAcrossRanksAreRefusedOnEveryRank) {
  ProcessGroupPtr group = group_with(CollectiveAlgorithm::kAuto, "sym_sizes");
  try {
    allocate_symmetric_memory(group, group->rank() == 0 ? 4096 : 8192);
    ADD_FAILURE() << "no error";
  } catch (const CommError& e) {
    EXPECT_NE(std::string(e.what()).find("allocate_symmetric_memory bytes"), std::string::npos)
        << e.what();
  }
}

TEST(SymmetricMemory, ReduceScatterInPlaceMatchesReferenceAndCopyingPath) {
  ProcessGroupPtr group = group_with(CollectiveAlgorithm::kAuto, "sym_rs");
  const int p = group->size();
  const int me = group->rank();
  // 300000 fp32 per shard: larger than one of the segment's rounds; offset 4 KiB + 64 bytes.
  const std::int64_t shard = 300000;
  const std::size_t offset = 4096 + 64;
  SymmetricMemoryPtr memory =
      allocate_symmetric_memory(group, offset + static_cast<std::size_t>(p * shard) * 8);
  ASSERT_TRUE(memory->shared());
  std::uint64_t seed = 7100;
  for (DType dtype : {DType::kFloat32, DType::kInt32, DType::kInt64}) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax}) {
      ++seed;
      const std::string label = testing_comm::op_label(dtype, op);
      std::byte* input = memory->data() + offset;
      fill(input, dtype, seed, me, p * shard);
      testing_comm::Buffer expected = reference_reduce(dtype, op, seed, p, me * shard, shard);
      testing_comm::Buffer output(dtype, shard);
      const TensorView in{input, p * shard, dtype};
      group->reduce_scatter(output.view(), in, op)->wait();
      EXPECT_TRUE(output.same_bits(expected)) << "out of place " << label;
      group->reduce_scatter(in.slice(me * shard, shard), in, op)->wait();
      EXPECT_EQ(std::memcmp(in.slice(me * shard, shard).data, expected.bytes.data(),
                            static_cast<std::size_t>(shard) * dtype_size(dtype)),
                0)
          << "in place " << label;
    }
  }
  // Rank-order fp32 sums of values of mixed magnitudes, pre-scaled: the copying path's bits.
  auto* in = reinterpret_cast<float*>(memory->data() + offset);
  std::vector<float> ordinary(static_cast<std::size_t>(p * shard));
  for (std::int64_t i = 0; i < p * shard; ++i) in[i] = ordinary[i] = order_sensitive_value(me, i);
  std::vector<float> got(static_cast<std::size_t>(shard)), want(got.size());
  group
      ->reduce_scatter_scaled({got.data(), shard, DType::kFloat32},
                              {in, p * shard, DType::kFloat32}, 1.0 / 3.0)
      ->wait();
  group
      ->reduce_scatter_scaled({want.data(), shard, DType::kFloat32},
                              {ordinary.data(), p * shard, DType::kFloat32}, 1.0 / 3.0)
      ->wait();
  EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0);
}

TEST(SymmetricMemory, AllReduceInPlaceMatchesReferenceAndCopyingPath) {
  ProcessGroupPtr group = group_with(CollectiveAlgorithm::kAuto, "sym_ar");
  const int p = group->size();
  const int me = group->rank();
  const std::int64_t n = 300007;  // more than one segment round; parts of unequal size
  SymmetricMemoryPtr memory =
      allocate_symmetric_memory(group, static_cast<std::size_t>(n) * 8 + 64);
  std::uint64_t seed = 7300;
  for (DType dtype : {DType::kFloat32, DType::kInt64}) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kAvg}) {
      if (dtype == DType::kInt64 && op == ReduceOp::kAvg) continue;
      ++seed;
      std::byte* data = memory->data() + 64;
      fill(data, dtype, seed, me, n);
      group->all_reduce({data, n, dtype}, op)->wait();
      testing_comm::Buffer expected = reference_reduce(dtype, op, seed, p, 0, n);
      EXPECT_EQ(
          std::memcmp(data, expected.bytes.data(), static_cast<std::size_t>(n) * dtype_size(dtype)),
          0)
          << testing_comm::op_label(dtype, op);
    }
  }
  auto* in = reinterpret_cast<float*>(memory->data());
  std::vector<float> ordinary(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) in[i] = ordinary[i] = order_sensitive_value(me, i);
  group->all_reduce({in, n, DType::kFloat32}, ReduceOp::kSum)->wait();
  group->all_reduce({ordinary.data(), n, DType::kFloat32}, ReduceOp::kSum)->wait();
  EXPECT_EQ(std::memcmp(in, ordinary.data(), ordinary.size() * sizeof(float)), 0);
}

TEST(SymmetricMemory, AllGatherInPlaceFillsEveryShard) {
  ProcessGroupPtr group = group_with(CollectiveAlgorithm::kAuto, "sym_ag");
  const int p = group->size();
  const int me = group->rank();
  const std::int64_t shard = 300001;  // odd: shards that are not 64-byte multiples
  SymmetricMemoryPtr memory =
      allocate_symmetric_memory(group, static_cast<std::size_t>(p * shard) * sizeof(float) + 4);
  const TensorView out{memory->data() + 4, p * shard, DType::kFloat32};
  for (bool in_place : {true, false}) {
    const std::uint64_t seed = in_place ? 7201 : 7202;
    testing_comm::Buffer own(DType::kFloat32, shard);
    fill(own.bytes.data(), DType::kFloat32, seed, me, shard);
    std::memset(out.data, 0xCD, out.nbytes());
    const TensorView own_slot = out.slice(me * shard, shard);
    if (in_place) std::memcpy(own_slot.data, own.bytes.data(), own_slot.nbytes());
    group->all_gather(out, in_place ? own_slot : own.view())->wait();
    for (int r = 0; r < p; ++r) {
      testing_comm::Buffer want(DType::kFloat32, shard);
      fill(want.bytes.data(), DType::kFloat32, seed, r, shard);
      EXPECT_EQ(std::memcmp(out.slice(r * shard, shard).data, want.bytes.data(),
                            static_cast<std::size_t>(shard) * sizeof(float)),
                0)
          << "shard " << r << (in_place ? " in place" : " out of place");
    }
  }
}

TEST(SymmetricMemory, InputOverwrittenRightAfterTheCallDoesNotReachThePeers) {
  ProcessGroupPtr group = group_with(CollectiveAlgorithm::kAuto, "sym_reuse");
  const int p = group->size();
  const int me = group->rank();
  const std::int64_t shard = 1 << 18;
  SymmetricMemoryPtr memory =
      allocate_symmetric_memory(group, static_cast<std::size_t>(p * shard) * sizeof(float));
  auto* input = reinterpret_cast<float*>(memory->data());
  std::vector<float> output(static_cast<std::size_t>(shard));
  // Each rank overwrites its input the moment the call returns; with ranks sharing cores a peer
  // is often still reading then, unless the call waited for it.
  for (int iteration = 0; iteration < 6; ++iteration) {
    for (std::int64_t i = 0; i < p * shard; ++i) input[i] = static_cast<float>(iteration + me);
    WorkPtr work = group->reduce_scatter({output.data(), shard, DType::kFloat32},
                                         {input, p * shard, DType::kFloat32}, ReduceOp::kSum);
    work->wait();
    std::fill_n(input, p * shard, -1e6f);
    const float want = static_cast<float>(p * iteration + p * (p - 1) / 2);
    std::int64_t wrong = 0;
    for (float v : output) wrong += v != want;
    EXPECT_EQ(wrong, 0) << "iteration " << iteration;
  }
}

TEST(SymmetricMemory, ARankPassingOrdinaryMemoryFailsTheCollectiveOnEveryRank) {
  ProcessGroupPtr group = group_with(CollectiveAlgorithm::kAuto, "sym_mismatch");
  const int p = group->size();
  const std::int64_t shard = 4096;
  SymmetricMemoryPtr memory =
      allocate_symmetric_memory(group, static_cast<std::size_t>(p * shard) * sizeof(float));
  std::vector<float> ordinary(static_cast<std::size_t>(p * shard), 1.0f);
  std::vector<float> output(static_cast<std::size_t>(shard));
  float* input = group->rank() == 0 ? ordinary.data() : reinterpret_cast<float*>(memory->data());
  try {
    group
        ->reduce_scatter({output.data(), shard, DType::kFloat32},
                         {input, p * shard, DType::kFloat32}, ReduceOp::kSum)
        ->wait();
    ADD_FAILURE() << "no error";
  } catch (const CommError& e) {
    EXPECT_NE(std::string(e.what()).find("same symmetric allocation at the same offset"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace shardwise
