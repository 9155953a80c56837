// The collectives tensor parallelism issues over the TP group, on row-major [rows, cols] blocks.
// A sequence shard is a contiguous block of rows: TP rank r holds rows [r*rows/T, (r+1)*rows/T).
// All of them are blocking and run only for float (the ProcessGroup reduces fp32); without TP
// (a group of size 1 or none) they copy or do nothing.
#pragma once

#include <cstdint>
#include <vector>

#include "shardwise/model/tensor_parallel.hpp"

namespace shardwise {

// In place over the TP group.
template <typename Scalar>
void tp_all_reduce(const TensorParallelOptions& tp, Scalar* data, std::int64_t count,
                   ReduceOp op = ReduceOp::kSum);

// full[rows_local * T, cols] = the TP ranks' shards [rows_local, cols] in rank order.
template <typename Scalar>
void tp_all_gather_rows(const TensorParallelOptions& tp, const Scalar* shard,
                        std::int64_t rows_local, std::int64_t cols, std::vector<Scalar>& full);

// shard[rows / T, cols] = this rank's block of the sum of every rank's full[rows, cols].
template <typename Scalar>
void tp_reduce_scatter_rows(const TensorParallelOptions& tp, const Scalar* full, std::int64_t rows,
                            std::int64_t cols, std::vector<Scalar>& shard);

}  // namespace shardwise
