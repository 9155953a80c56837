#include "shardwise/train/device_training.hpp"

#include <mutex>
#include <utility>

#include "shardwise/core/error.hpp"

namespace shardwise {
namespace {

std::mutex backend_mutex;
std::shared_ptr<const DeviceTrainingBackend>& backend_slot() {
  static std::shared_ptr<const DeviceTrainingBackend> backend;
  return backend;
}

// The two DDPs' param buffers, pairwise; they must match in count and size.
template <typename Copy>
void copy_param_buffers(const DistributedDataParallel& from, const DistributedDataParallel& to,
                        Copy copy) {
  SW_CHECK(from.buffers().size() == to.buffers().size(), "device training: ", from.buffers().size(),
           " param buffers against ", to.buffers().size());
  for (std::size_t i = 0; i < from.buffers().size(); ++i) {
    const TensorView src = from.buffers()[i]->param_data();
    const TensorView dst = to.buffers()[i]->param_data();
    SW_CHECK(src.nbytes() == dst.nbytes() && src.dtype == dst.dtype, "device training: buffer ", i,
             " differs between the host mirror and the device");
    copy(dst.data, src.data, src.nbytes());
  }
}

}  // namespace

void set_device_training_backend(std::shared_ptr<const DeviceTrainingBackend> backend) {
  std::lock_guard lock(backend_mutex);
  backend_slot() = std::move(backend);
}

std::shared_ptr<const DeviceTrainingBackend> device_training_backend() {
  std::lock_guard lock(backend_mutex);
  return backend_slot();
}

void copy_training_state_to_host(const DeviceTrainingBackend& backend, DeviceTraining& device,
                                 DistributedDataParallel& host_ddp,
                                 optim::Optimizer& host_optimizer) {
  device.ddp->finish_all_param_sync();  // every rank holds every updated param
  copy_param_buffers(*device.ddp, host_ddp, [&backend](void* dst, const void* src, std::size_t n) {
    backend.copy_to_host(dst, src, n);
  });
  host_optimizer.load_state_dict(device.optimizer->state_dict());
}

void copy_training_state_to_device(const DeviceTrainingBackend& backend,
                                   DistributedDataParallel& host_ddp,
                                   const optim::Optimizer& host_optimizer, DeviceTraining& device) {
  host_ddp.finish_all_param_sync();
  device.ddp->finish_all_param_sync();  // nothing may still write the device params
  copy_param_buffers(host_ddp, *device.ddp, [&backend](void* dst, const void* src, std::size_t n) {
    backend.copy_to_device(dst, src, n);
  });
  device.optimizer->load_state_dict(host_optimizer.state_dict());
}

}  // namespace shardwise
