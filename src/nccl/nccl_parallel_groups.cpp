#include "shardwise/nccl/nccl_process_group.hpp"

namespace shardwise {

ParallelGroups make_nccl_parallel_groups(const ParallelGroups& host, int device,
                                         const NcclOptions& options) {
  auto nccl_of = [&](const ProcessGroupPtr& group) -> ProcessGroupPtr {
    return group == nullptr ? nullptr : make_nccl_process_group(group, device, options);
  };
  ParallelGroups out;
  out.world = nccl_of(host.world);
  out.data_parallel = nccl_of(host.data_parallel);
  out.tensor_parallel = nccl_of(host.tensor_parallel);
  out.pipeline_parallel = nccl_of(host.pipeline_parallel);
  out.expert_parallel = nccl_of(host.expert_parallel);
  out.expert_data_parallel = nccl_of(host.expert_data_parallel);
  out.expert_tensor_parallel = nccl_of(host.expert_tensor_parallel);
  out.sizes = host.sizes;
  return out;
}

}  // namespace shardwise
