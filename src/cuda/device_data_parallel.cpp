#include "shardwise/cuda/device_data_parallel.hpp"

#include <utility>
#include <vector>

#include "shardwise/comm/host_staged_process_group.hpp"
#include "shardwise/cuda/device_memory.hpp"
#include "shardwise/optim/buffer_routing.hpp"
#include "shardwise/optim/chained_optimizer.hpp"
#include "shardwise/optim/data_parallel_setup.hpp"
#include "shardwise/optim/distributed_optimizer.hpp"
#include "shardwise/optim/layer_wise_distributed_optimizer.hpp"

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
  DeviceDataParallel out;
  out.device = device;
  auto memory = std::make_shared<DeviceBufferMemory>(device);  // checks the device first
  auto math = std::make_shared<DeviceShardMath>(device, allow_tf32);
  out.staged_groups = host_staged_groups(host_groups);
  config.use_distributed_optimizer = true;  // as the layer-wise mode: grads reduce-scattered
  config.use_legacy_param_sync = false;
  out.ddp = std::make_unique<DistributedDataParallel>(params, std::move(layout), config,
                                                      out.staged_groups, memory);

  using optim::AskingOptimizer;
  using optim::BufferTagging;
  auto layer_wise = [](const BufferKey& key) {
    return optim::bucket_is_managed_by_layer_wise_optimizer(key, BufferTagging::kTagged,
                                                            AskingOptimizer::kLayerWise);
  };
  auto element_sharded = [](const BufferKey& key) {
    return !optim::bucket_is_managed_by_layer_wise_optimizer(key, BufferTagging::kTagged,
                                                             AskingOptimizer::kElementSharded);
  };
  std::vector<std::unique_ptr<optim::Optimizer>> children;
  children.push_back(std::make_unique<optim::LayerWiseDistributedOptimizer>(
      *out.ddp, layer_wise, muon, adamw, false, math));
  children.push_back(std::make_unique<optim::DistributedOptimizer>(*out.ddp, element_sharded,
                                                                   adamw, false, math));
  auto chain = std::make_unique<optim::ChainedOptimizer>(std::move(children));
  chain->set_world_reduce(
      [world](double local) { return optim::all_reduce_sum_exact(*world, local); });
  out.optimizer = std::move(chain);
  return out;
}

}  // namespace shardwise::cuda
