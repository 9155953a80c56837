// A tensor-parallel shard of a 2-D weight, as the optimizer sees it: which group holds the other
// shards and how the full matrix is split (Megatron's partition_dim / partition_stride). Muon
// orthogonalises the full matrix, so it gathers the shards, runs Newton–Schulz and keeps its own
// slice; the result equals the unsharded (tp = 1) update.
//
// Split of dimension `partition_dim` (full size D) over T ranks with stride s: the dimension is
// s blocks of D/s; each block is cut into T pieces of D/(s*T); rank r holds piece r of every block
// (fused QKV: stride 3, so rank r holds the q, k and v rows of its own heads).
#pragma once

#include <cstdint>
#include <vector>

#include "shardwise/comm/process_group.hpp"

namespace shardwise::optim {

struct TensorParallelSplit {
  ProcessGroup* group = nullptr;  // the tensor-parallel group; rank r holds piece r
  int partition_dim = 0;          // 0: rows (column-parallel), 1: columns (row-parallel)
  int stride = 1;
};

// The full matrix's [rows, cols] for a shard of [shard_rows, shard_cols].
std::vector<std::int64_t> full_matrix_shape(const TensorParallelSplit& split,
                                            std::int64_t shard_rows, std::int64_t shard_cols);

// Collective over split.group: every rank passes its shard and gets the full matrix (row-major).
std::vector<float> gather_full_matrix(const TensorParallelSplit& split, const float* shard,
                                      std::int64_t shard_rows, std::int64_t shard_cols);

// This rank's shard of a full matrix (the inverse of gather_full_matrix).
void take_matrix_shard(const TensorParallelSplit& split, const float* full, std::int64_t full_rows,
                       std::int64_t full_cols, float* shard);

}  // namespace shardwise::optim
