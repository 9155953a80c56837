// Device-resident data parallelism for ranks that share GPUs: DistributedDataParallel with its
// param and grad buffers on a CUDA device (DeviceBufferMemory), its collectives through
// host-staged MPI (HostStagedProcessGroup over the given host groups), and the layer-wise
// optimizer chain — Chained(LayerWise(Muon), Distributed(AdamW)), as the layer-wise mode builds
// it on the host — with its state and math on the same device (DeviceShardMath). Layout,
// bucketing, dispatch order and ownership are the host path's: the same classes and the same
// builder (optim::make_layer_wise_data_parallel), given device memory.
#pragma once

#include <memory>

#include "shardwise/ddp/distributed_data_parallel.hpp"
#include "shardwise/optim/adamw.hpp"
#include "shardwise/optim/layer_wise_data_parallel.hpp"
#include "shardwise/optim/muon.hpp"
#include "shardwise/optim/optimizer.hpp"

namespace shardwise::cuda {

struct DeviceDataParallel {
  int device = 0;
  DataParallelGroups staged_groups;  // what the DDP talks to
  std::unique_ptr<DistributedDataParallel> ddp;
  std::unique_ptr<optim::Optimizer> optimizer;
};

// Wraps each group of `host_groups` in a HostStagedProcessGroup (pinned staging via cudaMemcpy).
DataParallelGroups host_staged_groups(const DataParallelGroups& host_groups);

// Builds the DDP (layer-wise layout `layout`, e.g. from the layer-wise mode's layout algorithm;
// reduce-scatter forced on) and the layer-wise optimizer chain on `device`, with grad statistics
// summed over `world`. Throws InvalidArgument naming the device when it does not exist, and the
// host classes' errors for anything else (bf16 param buffers, TP Muon params, shard groups
// smaller than dp: not on the device yet).
DeviceDataParallel make_device_layer_wise(
    const ParamList& params, FullParamLayout layout, DistributedDataParallelConfig config,
    const DataParallelGroups& host_groups, const ProcessGroupPtr& world, int device,
    const optim::MuonOptions& muon, const optim::AdamWOptions& adamw, bool allow_tf32 = false);

// The same over groups already able to take device views (host_staged_groups(...), or NCCL
// groups when every rank has a GPU of its own); `staged_groups` of the result holds them.
DeviceDataParallel make_device_layer_wise_over(
    const ParamList& params, FullParamLayout layout, DistributedDataParallelConfig config,
    const DataParallelGroups& device_groups, const ProcessGroupPtr& world, int device,
    const optim::MuonOptions& muon, const optim::AdamWOptions& adamw, bool allow_tf32 = false);

}  // namespace shardwise::cuda
