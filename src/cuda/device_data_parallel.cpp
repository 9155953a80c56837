#include "shardwise/cuda/device_data_parallel.hpp"

#include <utility>
#include <vector>

#include "shardwise/comm/host_staged_process_group.hpp"
#include "shardwise/cuda/device_memory.hpp"

namespace shardwise::cuda {

DataParallelGroups host_staged_groups(const DataParallelGroups& host_groups) {
  auto staging = std::make_shared<CudaStaging>();
  DataParallelGroups staged;
  staged.data_parallel =
      std::make_shared<HostStagedProcessGroup>(host_groups.data_parallel, staging);
  if (host_groups.expert_data_parallel != nullptr &&
      host_groups.expert_data_parallel != host_groups.data_parallel) {
    staged.expert_data_parallel =
        std::make_shared<HostStagedProcessGroup>(host_groups.expert_data_parallel, staging);
  }
  return staged;
}

DeviceDataParallel make_device_layer_wise(const ParamList& params, FullParamLayout layout,
                                          DistributedDataParallelConfig config,
                                          const DataParallelGroups& host_groups,
                                          const ProcessGroupPtr& world, int device,
                                          const optim::MuonOptions& muon,
                                          const optim::AdamWOptions& adamw, bool allow_tf32) {
  DeviceBufferMemory{device};  // checks the device before any staging is set up
  return make_device_layer_wise_over(params, std::move(layout), std::move(config),
                                     host_staged_groups(host_groups), world, device, muon, adamw,
                                     allow_tf32);
}

DeviceDataParallel make_device_layer_wise_over(const ParamList& params, FullParamLayout layout,
                                               DistributedDataParallelConfig config,
                                               const DataParallelGroups& device_groups,
                                               const ProcessGroupPtr& world, int device,
                                               const optim::MuonOptions& muon,
                                               const optim::AdamWOptions& adamw, bool allow_tf32) {
  DeviceDataParallel out;
  out.device = device;
  auto memory = std::make_shared<DeviceBufferMemory>(device);  // checks the device first
  auto math = std::make_shared<DeviceShardMath>(device, allow_tf32);
  out.staged_groups = device_groups;
  optim::DataParallelOptimizer built = optim::make_layer_wise_data_parallel(
      params, std::move(layout), std::move(config), out.staged_groups, world, muon, adamw,
      std::move(memory), std::move(math));
  out.ddp = std::move(built.ddp);
  out.optimizer = std::move(built.optimizer);
  return out;
}

}  // namespace shardwise::cuda
