// Muon on tensor-parallel shards: the world is one TP group; every rank holds its shard of the
// same matrix (rows, columns, and a fused QKV with stride 3 split by heads) and steps it with the
// split registered. The shards of the result, gathered, equal Muon on the full matrix bit for bit
// (Newton–Schulz and the shape scale see the full matrix; each rank keeps its own slice).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "shardwise/comm/mpi_process_group.hpp"
#include "shardwise/optim/muon.hpp"
#include "shardwise/optim/tensor_parallel_matrix.hpp"

namespace shardwise::optim {
namespace {

std::vector<float> values(std::int64_t n, double seed) {
  std::vector<float> out(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    out[static_cast<std::size_t>(i)] = static_cast<float>(std::sin(seed * (i + 1) + 0.3 * i));
  }
  return out;
}

struct Case {
  int partition_dim, stride;
  bool qkv;
};

void check_case(const Case& c, ProcessGroup& group) {
  const int tp = group.size();
  const std::int64_t rows = 6 * tp * c.stride, cols = 4 * tp;
  std::vector<std::int64_t> qkv_split;
  if (c.qkv) qkv_split = {rows / 3, rows / 3, rows / 3};
  std::vector<float> full_param = values(rows * cols, 0.7), grad = values(rows * cols, 1.3);
  MuonOptions options;
  options.lr = 0.05;
  options.nesterov = true;

  // Reference: the unsharded matrix, two steps.
  std::vector<float> expected = full_param;
  Muon whole(single_group({{"w", {rows, cols}, expected.data(), grad.data(), qkv_split}}), options);
  whole.step_with_ready_grads();
  whole.step_with_ready_grads();

  const TensorParallelSplit split{&group, c.partition_dim, c.stride};
  const std::int64_t shard_rows = c.partition_dim == 0 ? rows / tp : rows;
  const std::int64_t shard_cols = c.partition_dim == 1 ? cols / tp : cols;
  std::vector<float> shard(static_cast<std::size_t>(shard_rows * shard_cols)), shard_grad(shard);
  take_matrix_shard(split, full_param.data(), rows, cols, shard.data());
  take_matrix_shard(split, grad.data(), rows, cols, shard_grad.data());
  std::vector<std::int64_t> shard_split;
  for (std::int64_t r : qkv_split) shard_split.push_back(r / tp);
  options.tensor_parallel["w"] = split;
  Muon sharded(
      single_group({{"w", {shard_rows, shard_cols}, shard.data(), shard_grad.data(), shard_split}}),
      options);
  sharded.step_with_ready_grads();
  sharded.step_with_ready_grads();

  const std::vector<float> got = gather_full_matrix(split, shard.data(), shard_rows, shard_cols);
  ASSERT_EQ(got.size(), expected.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i], expected[i])
        << "element " << i << " (dim " << c.partition_dim << ", stride " << c.stride << ")";
  }
  // The sharded update really moved the weights (not a no-op that happens to match).
  EXPECT_NE(expected, full_param);
}

TEST(MuonTensorParallel, ShardedUpdateEqualsFullMatrixUpdate) {
  const ProcessGroupPtr world = init_mpi_world();
  for (const Case& c : {Case{0, 1, false}, Case{1, 1, false}, Case{0, 3, true}}) {
    check_case(c, *world);
  }
}

TEST(MuonTensorParallel, GatherInvertsTakeShard) {
  const ProcessGroupPtr world = init_mpi_world();
  const int tp = world->size();
  const std::int64_t rows = 3 * tp, cols = 2 * tp;
  const std::vector<float> full = values(rows * cols, 0.1);
  for (int dim : {0, 1}) {
    const TensorParallelSplit split{world.get(), dim, 1};
    std::vector<float> shard(static_cast<std::size_t>(rows * cols / tp));
    take_matrix_shard(split, full.data(), rows, cols, shard.data());
    const auto shape =
        full_matrix_shape(split, dim == 0 ? rows / tp : rows, dim == 1 ? cols / tp : cols);
    EXPECT_EQ(gather_full_matrix(split, shard.data(), shape[0] / (dim == 0 ? tp : 1),
                                 shape[1] / (dim == 1 ? tp : 1)),
              full);
  }
}

}  // namespace
}  // namespace shardwise::optim
