// The CUDA training backend of the trainer (`training.device: cuda`, train/device_training.hpp):
// the reference GPT on the device (cuda::GptModelCuda, GEMMs in training.precision), the DDP
// buffers and the layer-wise optimizer chain in device memory (cuda::make_device_layer_wise_over),
// one device per rank by local rank (ranks share devices when there are more ranks than GPUs).
// Collectives: NCCL when the build has it, dp > 1 and every rank has a GPU of its own; otherwise
// host-staged MPI (what a machine with one GPU runs).
#pragma once

#include <memory>

#include "shardwise/train/device_training.hpp"

namespace shardwise {

std::shared_ptr<const DeviceTrainingBackend> cuda_training_backend();

// Makes it the trainer's backend (set_device_training_backend); the CLI calls it at start.
void register_cuda_training();

}  // namespace shardwise
