#include "shardwise/train_cuda/cuda_training.hpp"

#include <algorithm>
#include <utility>

#include "shardwise/comm/device_mapping.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/cuda/device_buffer.hpp"
#include "shardwise/cuda/device_data_parallel.hpp"
#include "shardwise/cuda/device_memory.hpp"
#include "shardwise/cuda/gpt_model_cuda.hpp"
#include "shardwise/cuda/mxfp8_cuda.hpp"
#include "shardwise/optim/data_parallel_setup.hpp"
#ifdef SHARDWISE_TRAIN_CUDA_NCCL
#include "shardwise/nccl/gpu_ownership.hpp"
#include "shardwise/nccl/nccl_process_group.hpp"
#endif

namespace shardwise {
namespace {

cuda::GemmPrecision gemm_precision(TrainingPrecision p) {
  switch (p) {
    case TrainingPrecision::kFp32:
      return cuda::GemmPrecision::kFp32;
    case TrainingPrecision::kTf32:
      return cuda::GemmPrecision::kTf32;
    case TrainingPrecision::kBf16:
      return cuda::GemmPrecision::kBf16;
  }
  return cuda::GemmPrecision::kFp32;
}

// The device GPT behind the trainer's interface.
using DeviceGpt = TrainableGpt<cuda::GptModelCuda>;

// Groups able to take device views, and the words the run's banner uses for them.
std::pair<DataParallelGroups, std::string> device_groups(const ParallelGroups& host, int device,
                                                         int dp) {
#ifdef SHARDWISE_TRAIN_CUDA_NCCL
  // Collective over the world: every rank takes the same branch.
  if (dp > 1 && every_rank_has_own_gpu(host.world, device)) {
    return {DataParallelGroups::from(make_nccl_parallel_groups(host, device)), "NCCL"};
  }
#endif
  (void)dp;
  return {cuda::host_staged_groups(DataParallelGroups::from(host)), "host-staged MPI"};
}

class CudaTrainingBackend final : public DeviceTrainingBackend {
 public:
  DeviceInfo device_for(const ProcessGroup& world) const override {
    const int count = cuda::device_count();
    SW_REQUIRE(count > 0, ConfigError, "training.device: cuda, but rank ", world.rank(),
               " sees no CUDA device (none installed, no driver, or CUDA_VISIBLE_DEVICES hides "
               "them)");
    const int local_rank = local_rank_from_environment().value_or(world.rank());
    DeviceInfo info;
    try {
      info.device = device_for_local_rank(local_rank, count, DeviceSharing::kShareDevices);
    } catch (const InvalidArgument& e) {
      throw ConfigError(str_cat("training.device: cuda: ", e.what()));
    }
    const cuda::DeviceDescription device = cuda::describe_device(info.device);
    info.name = device.name;
    info.free_bytes = static_cast<double>(device.free_bytes);
    const int local_size = local_size_from_environment().value_or(1);
    info.ranks_sharing = std::max(1, (local_size + count - 1 - info.device) / count);
    return info;
  }

  DeviceTraining build(const DeviceTrainingRequest& r) const override {
    const DeviceInfo info = device_for(*r.groups.world);
    const int dp = r.groups.data_parallel->size();
    auto [groups, collectives] = device_groups(r.groups, info.device, dp);
    DeviceTraining out;
    out.resources = std::make_shared<DataParallelGroups>(groups);
    auto model = std::make_unique<DeviceGpt>(
        r.model, cuda::GptCudaOptions{gemm_precision(r.config.training.precision)});
    const OptimizerConfig& spec = r.config.optimizer;
    cuda::DeviceDataParallel built = cuda::make_device_layer_wise_over(
        model->params(), r.host_ddp.layout(), r.host_ddp.config(), groups, r.groups.data_parallel,
        info.device, optim::muon_options(spec), optim::adamw_options(spec),
        r.config.training.precision == TrainingPrecision::kTf32);
    built.optimizer->set_step_options({spec.clip_grad, false});
    bind(*model, *built.ddp);
    out.ddp = std::move(built.ddp);
    out.optimizer = std::move(built.optimizer);
    out.model = std::move(model);
    out.description = str_cat("CUDA device ", info.device, " (", info.name, "), ",
                              to_string(r.config.training.precision), " GEMMs, ", collectives);
    return out;
  }

  void copy_to_host(void* host, const void* device, std::size_t bytes) const override {
    cuda::copy_to_host(host, device, bytes);
  }
  void copy_to_device(void* device, const void* host, std::size_t bytes) const override {
    cuda::copy_to_device(device, host, bytes);
  }

 private:
  // The model's params and grads are views into the device DDP's buffers; forward waits for a
  // param's all-gather only where it first reads the param (overlap_param_gather).
  static void bind(DeviceGpt& model, DistributedDataParallel& ddp) {
    std::vector<float*> values, grads;
    for (ParamId id = 0; id < model.params().size(); ++id) {
      values.push_back(ddp.param(id).as<float>());
      grads.push_back(ddp.main_grad(id).as<float>());
    }
    model.model().bind(std::move(values), std::move(grads));
    if (ddp.config().overlap_param_gather) {
      model.model().set_before_param_use(
          [&ddp](ParamId id) { ddp.finish_param_sync(ddp.bucket_group_of(id)); });
    }
  }
};

}  // namespace

std::shared_ptr<const DeviceTrainingBackend> cuda_training_backend() {
  static const auto backend = std::make_shared<const CudaTrainingBackend>();
  return backend;
}

void register_cuda_training() { set_device_training_backend(cuda_training_backend()); }

}  // namespace shardwise
