// Training on a device other than the host (`training.device: cuda`): the trainer keeps its host
// DDP and optimizer as a mirror of the run (the layout, checkpoints, the weights a caller sees)
// and asks a device backend for the model, the DDP buffers and the optimizer that train. The CUDA
// backend lives in the train_cuda layer, above this one; a program that links it registers it
// (the CLI does at start), and without one `training.device: cuda` is a ConfigError.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "shardwise/comm/process_group.hpp"
#include "shardwise/config/training_config.hpp"
#include "shardwise/ddp/distributed_data_parallel.hpp"
#include "shardwise/optim/optimizer.hpp"
#include "shardwise/train/trainable_model.hpp"

namespace shardwise {

struct DeviceTrainingRequest {
  const TrainingConfig& config;
  const GptConfig& model;
  const DistributedDataParallel& host_ddp;  // its layout and config are the device DDP's
  const ParallelGroups& groups;             // host (MPI) groups
};

// What a backend builds. Members are destroyed bottom to top: the optimizer before the buffers it
// points into, those before the model bound to them and the groups they talk through.
struct DeviceTraining {
  std::shared_ptr<void> resources;  // groups, streams: whatever the members below use
  std::unique_ptr<TrainableModel> model;
  std::unique_ptr<DistributedDataParallel> ddp;  // param and grad buffers in device memory
  std::unique_ptr<optim::Optimizer> optimizer;   // its state in device memory
  std::string description;  // the device and the collectives, for the run's banner
};

class DeviceTrainingBackend {
 public:
  virtual ~DeviceTrainingBackend() = default;
  // The device this rank would train on: its name and free memory. ConfigError naming the rank
  // and the device when it has none (no GPU, or a device index beyond the count).
  struct DeviceInfo {
    int device = 0;
    std::string name;
    double free_bytes = 0;
    int ranks_sharing = 1;  // ranks of this host on the same device
  };
  virtual DeviceInfo device_for(const ProcessGroup& world) const = 0;
  virtual DeviceTraining build(const DeviceTrainingRequest& request) const = 0;
  // Synchronous copies between host memory and this backend's device memory.
  virtual void copy_to_host(void* host, const void* device, std::size_t bytes) const = 0;
  virtual void copy_to_device(void* device, const void* host, std::size_t bytes) const = 0;
};

// The backend `training.device: cuda` uses (nullptr: none registered).
void set_device_training_backend(std::shared_ptr<const DeviceTrainingBackend> backend);
std::shared_ptr<const DeviceTrainingBackend> device_training_backend();

// Host mirror <-> device: params (whole buffers, padding included) and optimizer state. Both
// DDPs must have the same layout (the device one is built from the host one's).
void copy_training_state_to_host(const DeviceTrainingBackend& backend, DeviceTraining& device,
                                 DistributedDataParallel& host_ddp,
                                 optim::Optimizer& host_optimizer);
void copy_training_state_to_device(const DeviceTrainingBackend& backend,
                                   DistributedDataParallel& host_ddp,
                                   const optim::Optimizer& host_optimizer, DeviceTraining& device);

}  // namespace shardwise
