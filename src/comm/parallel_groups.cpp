// make_parallel_groups: one communicator split per parallel dimension. Each group's color is its
// lowest world rank and each rank's key its position, so the split reproduces
// parallel_group_members exactly.
#include "shardwise/comm/mpi_process_group.hpp"
#include "shardwise/comm/parallel_layout.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise {

namespace {

ProcessGroupPtr split_dim(const ProcessGroupPtr& world, const ParallelSizes& sizes,
                          ParallelDim dim) {
  const std::vector<int> members = parallel_group_members(sizes, dim, world->rank());
  std::string name = str_cat(parallel_dim_name(dim), "[");
  int key = 0;
  for (std::size_t i = 0; i < members.size(); ++i) {
    name += str_cat(i ? "," : "", members[i]);
    if (members[i] == world->rank()) key = static_cast<int>(i);
  }
  name += "]";
  return split_group(world, members.front(), key, name);
}

}  // namespace

ParallelGroups make_parallel_groups(const ProcessGroupPtr& world, ParallelSizes sizes) {
  SW_REQUIRE(world != nullptr, InvalidArgument, "make_parallel_groups: no world group");
  ParallelGroups groups;
  groups.sizes = resolve_parallel_sizes(sizes, world->size());
  groups.world = world;
  groups.tensor_parallel = split_dim(world, groups.sizes, ParallelDim::kTensor);
  groups.data_parallel = split_dim(world, groups.sizes, ParallelDim::kData);
  groups.pipeline_parallel = split_dim(world, groups.sizes, ParallelDim::kPipeline);
  groups.expert_parallel = split_dim(world, groups.sizes, ParallelDim::kExpert);
  groups.expert_data_parallel = split_dim(world, groups.sizes, ParallelDim::kExpertData);
  groups.expert_tensor_parallel = split_dim(world, groups.sizes, ParallelDim::kExpertTensor);
  return groups;
}

}  // namespace shardwise
