// The CUDA side of the trainer's device seam (train/device_training.hpp): `shardwise train` with
// training.device: cuda. Each rank takes the GPU of its local rank (ranks share GPUs when a node
// has fewer GPUs than ranks), builds GptModelCuda (training.precision: fp32, TF32 or bf16
// products, fp32 weights) over device DDP buffers with the layer-wise optimizer on the device, and
// runs the bucket collectives through NCCL when every rank has a GPU of its own (and the build
// has NCCL), else through host-staged MPI. No CUDA headers.
#pragma once

#include "shardwise/train/device_training.hpp"

namespace shardwise {

// ConfigError on every rank when no CUDA device is visible or the run does not fit in the free
// device memory; InvalidArgument naming the device when a rank's device does not exist.
DeviceTrainingFactory cuda_device_training();

}  // namespace shardwise
