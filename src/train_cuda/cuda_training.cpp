#include "shardwise/train_cuda/cuda_training.hpp"

#include <cuda_runtime.h>

#include <exception>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "shardwise/comm/device_mapping.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/core/logging.hpp"
#include "shardwise/cuda/device_data_parallel.hpp"
#include "shardwise/cuda/gpt_model_cuda.hpp"
#include "shardwise/optim/data_parallel_setup.hpp"
#include "shardwise/train/memory_estimate.hpp"
#if SHARDWISE_TRAIN_CUDA_HAS_NCCL
#include "shardwise/nccl/gpu_ownership.hpp"
#include "shardwise/nccl/nccl_process_group.hpp"
#endif

namespace shardwise {
namespace {

void check_cuda_call(cudaError_t status, const char* what) {
  SW_REQUIRE(status == cudaSuccess, InvalidArgument, what, " failed: ", cudaGetErrorString(status));
}

// The device model, and the groups its DDP talks to (NCCL communicators live as long as it).
class CudaGpt final : public DeviceGpt {
 public:
  CudaGpt(const GptConfig& config, const cuda::GptCudaOptions& options) : model_(config, options) {}
  cuda::GptModelCuda& model() { return model_; }
  double forward(const std::int32_t* tokens, const std::int32_t* targets, int batch,
                 int seq) override {
    return model_.forward(tokens, targets, batch, seq);
  }
  void backward(double loss_scale, const std::function<void(ParamId)>& grad_ready) override {
    model_.backward(loss_scale, grad_ready);
  }
  std::vector<bool> exact_match() const override { return model_.exact_match(); }
  ParallelGroups device_groups;

 private:
  cuda::GptModelCuda model_;
};

cuda::GemmPrecision gemm_precision(TrainingPrecision precision) {
  switch (precision) {
    case TrainingPrecision::kTf32:
      return cuda::GemmPrecision::kTf32;
    case TrainingPrecision::kBf16:
      return cuda::GemmPrecision::kBf16;
    case TrainingPrecision::kFp32:
      break;
  }
  return cuda::GemmPrecision::kFp32;
}

int visible_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();  // no driver / no device: the error is not sticky, clear it
    return 0;
  }
  return count;
}

struct DeviceChoice {
  int device = 0;
  int ranks_per_device = 1;  // ranks of this job on the device (an upper bound)
  std::string name;
};

// The GPU of this rank's local rank: one per rank when there are enough, shared otherwise.
DeviceChoice choose_device(int world_size) {
  const int count = visible_device_count();
  SW_REQUIRE(count > 0, ConfigError,
             "training.device: cuda, but no CUDA device is visible on this machine; set "
             "training.device: cpu");
  const bool share = world_size > count;
  DeviceChoice choice;
  choice.device = device_for_local_rank(
      local_rank_from_environment().value_or(0), count,
      share ? DeviceSharing::kShareDevices : DeviceSharing::kOneDevicePerRank);
  choice.ranks_per_device = share ? (world_size + count - 1) / count : 1;
  cudaDeviceProp prop{};
  check_cuda_call(cudaGetDeviceProperties(&prop, choice.device), "cudaGetDeviceProperties");
  choice.name = prop.name;
  check_cuda_call(cudaSetDevice(choice.device), "cudaSetDevice");
  return choice;
}

// The memory preflight on the device: the trainer's estimate (weights, grads, optimizer shard,
// activations) for every rank that shares this GPU against what cudaMemGetInfo reports free.
void require_device_memory(const DeviceChoice& choice, const DeviceTrainingRequest& request) {
  const TrainingConfig& config = request.config;
  const MemoryEstimate estimate =
      estimate_training_memory(request.model, config.training.micro_batch_size,
                               config.data.eval_samples, request.groups.data_parallel->size());
  std::size_t free_bytes = 0, total_bytes = 0;
  check_cuda_call(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
  const double needed = estimate.total() * choice.ranks_per_device;
  SW_REQUIRE(needed <= static_cast<double>(free_bytes), ConfigError, "the model needs about ",
             format_bytes(estimate.total()), " per rank (", choice.ranks_per_device,
             " rank(s) on the device) but CUDA device ", choice.device, " (", choice.name, ") has ",
             format_bytes(static_cast<double>(free_bytes)), " free of ",
             format_bytes(static_cast<double>(total_bytes)),
             "; use a smaller model or micro-batch, or more GPUs");
}

// A rank-local failure (no device, too little memory) becomes the same error on every rank, so
// no rank waits in a collective for one that has given up.
template <typename Fn>
auto agreed_on_every_rank(ProcessGroup& group, Fn&& fn) -> decltype(fn()) {
  std::exception_ptr failure;
  std::optional<decltype(fn())> result;
  try {
    result.emplace(fn());
  } catch (const Error&) {
    failure = std::current_exception();
  }
  const double failed = optim::all_reduce_sum_exact(group, failure ? 1.0 : 0.0);
  if (failure) std::rethrow_exception(failure);
  SW_REQUIRE(failed == 0, ConfigError,
             "another rank could not set up its CUDA device (see its message)");
  return std::move(*result);
}

// NCCL when every rank has its own GPU (and the build has NCCL); host-staged MPI otherwise.
DataParallelGroups collective_groups(const ParallelGroups& host, int device, CudaGpt& model,
                                     std::string& backend) {
#if SHARDWISE_TRAIN_CUDA_HAS_NCCL
  if (every_rank_has_own_gpu(host.world, device)) {
    model.device_groups = make_nccl_parallel_groups(host, device);
    backend = "NCCL";
    return DataParallelGroups::from(model.device_groups);
  }
#else
  (void)device;
  (void)model;
#endif
  backend = "host-staged MPI";
  return cuda::host_staged_groups(DataParallelGroups::from(host));
}

// Whole param buffers, buffer by buffer: the device DDP and the host mirror share the layout.
void copy_param_buffers(const DistributedDataParallel& from, const DistributedDataParallel& to,
                        cudaMemcpyKind kind) {
  SW_CHECK(from.buffers().size() == to.buffers().size(), "device and host DDP differ in buffers");
  for (std::size_t i = 0; i < from.buffers().size(); ++i) {
    const TensorView src = from.buffers()[i]->param_data();
    const TensorView dst = to.buffers()[i]->param_data();
    SW_CHECK(src.nbytes() == dst.nbytes() && from.buffers()[i]->key() == to.buffers()[i]->key(),
             "device and host DDP differ in buffer ", i);
    check_cuda_call(cudaMemcpy(dst.data, src.data, src.nbytes(), kind), "cudaMemcpy");
  }
}

DeviceTraining build_cuda_training(const DeviceTrainingRequest& request) {
  const TrainingConfig& config = request.config;
  ProcessGroup& dp_group = *request.groups.data_parallel;
  const DeviceChoice choice = agreed_on_every_rank(dp_group, [&] {
    DeviceChoice c = choose_device(request.groups.world->size());
    require_device_memory(c, request);
    return c;
  });
  cuda::GptCudaOptions options;
  options.precision = gemm_precision(config.training.precision);
  auto model = std::make_unique<CudaGpt>(request.model, options);
  std::string backend;
  const DataParallelGroups groups =
      collective_groups(request.groups, choice.device, *model, backend);
  cuda::DeviceDataParallel built = cuda::make_device_layer_wise_over(
      request.params, request.host_mirror.layout(), request.host_mirror.config(), groups,
      request.groups.data_parallel, choice.device, optim::muon_options(config.optimizer),
      optim::adamw_options(config.optimizer),
      config.training.precision == TrainingPrecision::kTf32);
  built.optimizer->set_step_options({config.optimizer.clip_grad, false});
  DistributedDataParallel* ddp = built.ddp.get();
  std::vector<float*> values, grads;
  for (ParamId id = 0; id < request.params.size(); ++id) {
    values.push_back(ddp->param(id).as<float>());
    grads.push_back(ddp->main_grad(id).as<float>());
  }
  model->model().bind(std::move(values), std::move(grads));
  if (ddp->config().overlap_param_gather) {
    model->model().set_before_param_use(
        [ddp](ParamId id) { ddp->finish_param_sync(ddp->bucket_group_of(id)); });
  }
  DeviceTraining out;
  out.copy_params_from_host = [ddp](const DistributedDataParallel& host) {
    copy_param_buffers(host, *ddp, cudaMemcpyHostToDevice);
  };
  out.copy_params_to_host = [ddp](DistributedDataParallel& host) {
    copy_param_buffers(*ddp, host, cudaMemcpyDeviceToHost);
  };
  out.description =
      str_cat("cuda:", choice.device, " (", choice.name, "), ",
              to_string(config.training.precision), " products, ", backend, " collectives");
  out.model = std::move(model);
  out.ddp = std::move(built.ddp);
  out.optimizer = std::move(built.optimizer);
  return out;
}

}  // namespace

DeviceTrainingFactory cuda_device_training() { return build_cuda_training; }

}  // namespace shardwise
