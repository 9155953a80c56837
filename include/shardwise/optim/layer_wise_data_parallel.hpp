// The layer-wise mode's DDP and optimizer chain — Chained(LayerWise(Muon), Distributed(AdamW))
// over a DDP that reduce-scatters — built on a given memory: the buffers from `memory`, the
// optimizer state and math from `math`, collectives over `groups` (which must accept views in that
// memory: a HostStagedProcessGroup for device memory). The CUDA layer builds the device version
// with it (cuda::make_device_layer_wise); with host memory and host math it is the host path.
#pragma once

#include <memory>

#include "shardwise/ddp/buffer_memory.hpp"
#include "shardwise/ddp/distributed_data_parallel.hpp"
#include "shardwise/optim/adamw.hpp"
#include "shardwise/optim/muon.hpp"
#include "shardwise/optim/optimizer.hpp"
#include "shardwise/optim/shard_math.hpp"

namespace shardwise::optim {

struct DataParallelOptimizer {
  std::unique_ptr<DistributedDataParallel> ddp;
  std::unique_ptr<Optimizer> optimizer;
};

// `layout` is a layer-wise (tagged) layout, e.g. what the layer-wise mode's wrap_with_ddp built;
// use_distributed_optimizer is forced on. Grad statistics are summed exactly over `world`.
DataParallelOptimizer make_layer_wise_data_parallel(
    const ParamList& params, FullParamLayout layout, DistributedDataParallelConfig config,
    const DataParallelGroups& groups, const ProcessGroupPtr& world, const MuonOptions& muon,
    const AdamWOptions& adamw, BufferMemoryPtr memory, ShardMathPtr math);

}  // namespace shardwise::optim
