// Which world ranks form the tensor-, data-, pipeline-, expert- and expert-data-parallel groups:
// pure rank arithmetic (no MPI), shared by make_parallel_groups and its tests.
//
// Dense layout (Megatron's default order): world rank = tp_rank + tp * (dp_rank + dp * pp_rank).
// Expert layout inside one pipeline stage of tp*dp ranks (Megatron's tp-ep-dp order for experts):
// stage-local rank = etp_rank + etp * (ep_rank + ep * edp_rank), edp = tp * dp / (etp * ep).
#pragma once

#include <vector>

#include "shardwise/comm/process_group.hpp"

namespace shardwise {

enum class ParallelDim { kTensor, kData, kPipeline, kExpert, kExpertData, kExpertTensor };
const char* parallel_dim_name(ParallelDim dim);

// Validates `sizes` against the world, derives dp when 0 and etp when 0 (= tp). Throws
// InvalidArgument naming the sizes that do not divide.
ParallelSizes resolve_parallel_sizes(ParallelSizes sizes, int world_size);

// Size of the groups of `dim` under resolved sizes (edp = tp * dp / (etp * ep)).
int parallel_dim_size(const ParallelSizes& resolved, ParallelDim dim);

// World ranks of the `dim` group that `world_rank` belongs to, in group-rank order.
std::vector<int> parallel_group_members(const ParallelSizes& resolved, ParallelDim dim,
                                        int world_rank);

}  // namespace shardwise
