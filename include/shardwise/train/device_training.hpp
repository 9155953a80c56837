// The trainer's seam to an accelerator. With training.device other than cpu, run_training asks
// TrainerOptions::device_training for the model, its DDP buffers and the optimizer in device
// memory (the train layer cannot include the optional CUDA layers: the CLI passes the CUDA
// implementation, train_cuda/cuda_training.hpp, when the build has one). The trainer then drives
// them exactly as it drives the CPU model, and keeps a host DDP of the same layout as the mirror
// that initialisation, checkpoints and the caller's view of the weights go through.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "shardwise/comm/process_group.hpp"
#include "shardwise/config/training_config.hpp"
#include "shardwise/ddp/distributed_data_parallel.hpp"
#include "shardwise/layout/param_info.hpp"
#include "shardwise/model/gpt_config.hpp"
#include "shardwise/optim/optimizer.hpp"

namespace shardwise {

// The reference GPT's forward and backward on a device (GptModel's contract: the same parameter
// list, losses, grad_ready order and exact-match rule).
class DeviceGpt {
 public:
  virtual ~DeviceGpt() = default;
  virtual double forward(const std::int32_t* tokens, const std::int32_t* targets, int batch,
                         int seq) = 0;
  virtual void backward(double loss_scale, const std::function<void(ParamId)>& grad_ready) = 0;
  virtual std::vector<bool> exact_match() const = 0;
};

// What the trainer needs to build the device side: the run's config and groups, the model's
// parameters and the host mirror whose layout and DDP settings the device DDP copies.
struct DeviceTrainingRequest {
  const TrainingConfig& config;
  const GptConfig& model;
  const ParamList& params;
  const DistributedDataParallel& host_mirror;
  const ParallelGroups& groups;  // host (MPI) groups
};

// The device model bound to the device DDP's buffers, the DDP and the optimizer over them.
// Destroyed optimizer first, then the DDP, then the model (the trainer's member order).
struct DeviceTraining {
  std::unique_ptr<DeviceGpt> model;
  std::unique_ptr<DistributedDataParallel> ddp;
  std::unique_ptr<optim::Optimizer> optimizer;
  // Whole param buffers between the device DDP and the host mirror (same layout, same order).
  std::function<void(const DistributedDataParallel& host)> copy_params_from_host;
  std::function<void(DistributedDataParallel& host)> copy_params_to_host;
  std::string description;  // for the run's banner: device, GPU name, collective backend
};

using DeviceTrainingFactory = std::function<DeviceTraining(const DeviceTrainingRequest&)>;

}  // namespace shardwise
