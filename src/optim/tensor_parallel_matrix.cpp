#include "shardwise/optim/tensor_parallel_matrix.hpp"

#include <algorithm>

#include "shardwise/core/error.hpp"

namespace shardwise::optim {
namespace {

void check(const TensorParallelSplit& split) {
  SW_REQUIRE(split.group != nullptr, InvalidArgument, "tensor-parallel split without a group");
  SW_REQUIRE(split.partition_dim == 0 || split.partition_dim == 1, InvalidArgument,
             "tensor-parallel split of a matrix along dim ", split.partition_dim,
             " (expected 0 or 1)");
  SW_REQUIRE(split.stride >= 1, InvalidArgument, "tensor-parallel stride ", split.stride);
}

// Copies between one rank's shard and the full matrix: for each of the stride blocks, the
// rank's piece; `to_full` picks the direction.
void copy_pieces(const TensorParallelSplit& split, int rank, std::int64_t full_rows,
                 std::int64_t full_cols, float* full, float* shard, bool to_full) {
  const int tp = split.group->size();
  const bool rows = split.partition_dim == 0;
  const std::int64_t dim = rows ? full_rows : full_cols;
  SW_REQUIRE(dim % (std::int64_t{tp} * split.stride) == 0, ShapeError, "a matrix dimension of ",
             dim, " cannot be split over ", tp, " ranks with stride ", split.stride);
  const std::int64_t piece = dim / (std::int64_t{tp} * split.stride);
  const std::int64_t shard_cols = rows ? full_cols : full_cols / tp;
  for (int block = 0; block < split.stride; ++block) {
    const std::int64_t full_first = block * (dim / split.stride) + rank * piece;
    const std::int64_t shard_first = block * piece;
    if (rows) {
      float* f = full + full_first * full_cols;
      float* s = shard + shard_first * full_cols;
      const std::int64_t n = piece * full_cols;
      to_full ? std::copy(s, s + n, f) : std::copy(f, f + n, s);
      continue;
    }
    for (std::int64_t r = 0; r < full_rows; ++r) {
      float* f = full + r * full_cols + full_first;
      float* s = shard + r * shard_cols + shard_first;
      to_full ? std::copy(s, s + piece, f) : std::copy(f, f + piece, s);
    }
  }
}

}  // namespace

std::vector<std::int64_t> full_matrix_shape(const TensorParallelSplit& split,
                                            std::int64_t shard_rows, std::int64_t shard_cols) {
  check(split);
  const std::int64_t tp = split.group->size();
  return split.partition_dim == 0 ? std::vector<std::int64_t>{shard_rows * tp, shard_cols}
                                  : std::vector<std::int64_t>{shard_rows, shard_cols * tp};
}

std::vector<float> gather_full_matrix(const TensorParallelSplit& split, const float* shard,
                                      std::int64_t shard_rows, std::int64_t shard_cols) {
  const std::vector<std::int64_t> full_shape = full_matrix_shape(split, shard_rows, shard_cols);
  const int tp = split.group->size();
  const std::int64_t n = shard_rows * shard_cols;
  std::vector<float> gathered(static_cast<std::size_t>(n * tp));
  split.group
      ->all_gather(TensorView{gathered.data(), n * tp, DType::kFloat32},
                   TensorView{const_cast<float*>(shard), n, DType::kFloat32})
      ->wait();
  std::vector<float> full(gathered.size());
  for (int r = 0; r < tp; ++r) {
    copy_pieces(split, r, full_shape[0], full_shape[1], full.data(), gathered.data() + r * n, true);
  }
  return full;
}

void take_matrix_shard(const TensorParallelSplit& split, const float* full, std::int64_t full_rows,
                       std::int64_t full_cols, float* shard) {
  check(split);
  copy_pieces(split, split.group->rank(), full_rows, full_cols, const_cast<float*>(full), shard,
              false);
}

}  // namespace shardwise::optim
