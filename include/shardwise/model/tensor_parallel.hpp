// Tensor parallelism (Megatron's scheme) for the reference GPT: which TP group the model runs
// over, and how a full (tp = 1) parameter maps onto each TP rank's shard. See
// docs/tensor_parallel.md for how every layer is split.
#pragma once

#include <cstdint>

#include "shardwise/comm/process_group.hpp"
#include "shardwise/layout/param_info.hpp"

namespace shardwise {

struct TensorParallelOptions {
  // The TP group of this rank (TP ranks hold different shards of the same layers). nullptr or a
  // group of size 1 means no tensor parallelism: the model is exactly the tp = 1 model.
  ProcessGroup* group = nullptr;
  // Norms, residual adds and the embedding output work on a shard of the (batch*seq) rows:
  // all-gather before column-parallel GEMMs, reduce-scatter after row-parallel ones.
  bool sequence_parallel = false;
  // (The TP comm-overlap plan, per GEMM slot, goes here.)

  int size() const { return group != nullptr ? group->size() : 1; }
  int rank() const { return group != nullptr ? group->rank() : 0; }
  bool enabled() const { return size() > 1; }
};

// Copies tp rank `tp_rank`'s shard of one parameter out of its full value. `full` is the tp = 1
// model's ParamInfo of the parameter, `shard` the TP model's (same name; its tp_partition_dim and
// tp_stride say how it is split). Shard rows past the full extent (vocabulary padding) are set
// to zero. Throws ShapeError when the two infos do not describe the same parameter at this size.
template <typename Scalar>
void slice_tp_shard(const ParamInfo& full, const ParamInfo& shard, int tp_size, int tp_rank,
                    const Scalar* full_values, Scalar* shard_values);

// The inverse: writes tp rank `tp_rank`'s shard into its place in the full value (padding rows
// are dropped). A replicated parameter is copied whole.
template <typename Scalar>
void place_tp_shard(const ParamInfo& full, const ParamInfo& shard, int tp_size, int tp_rank,
                    const Scalar* shard_values, Scalar* full_values);

// Collective over the TP group: every rank passes its shard and receives the full (tp = 1)
// value. A replicated parameter is copied from the rank's own value.
void gather_tp_param(const ParamInfo& full, const ParamInfo& shard, ProcessGroup& tp_group,
                     const float* shard_values, float* full_values);

}  // namespace shardwise
