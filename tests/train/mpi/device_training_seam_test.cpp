// The trainer's device seam (train/device_training.hpp) without a GPU: a backend whose "device"
// is host memory (its own host DDP, optimizer and model, built with the layer-wise builder the
// CUDA backend uses) must train exactly as the CPU path does, bit for bit, since the same host
// math runs; that checks the trainer's use of the seam - which model and DDP each step drives, the
// initial weights copied over, checkpoints saved through the host mirror and resumed through it -
// everywhere CI runs. The CUDA backend itself is checked on a GPU by scripts/gpu_check.sh.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "shardwise/comm/mpi_process_group.hpp"
#include "shardwise/optim/data_parallel_setup.hpp"
#include "shardwise/optim/layer_wise_data_parallel.hpp"
#include "shardwise/train/device_training.hpp"
#include "shardwise/train/trainer.hpp"
#include "shared_temp_dir.hpp"

namespace shardwise {
namespace {

namespace fs = std::filesystem;

TrainingConfig seam_config(const std::string& device) {
  return parse_training_config(str_cat(R"(
model: {layers: 2, hidden: 32, heads: 4, ffn: 64}
data: {source: synthetic, task: addition, digits: 2, eval_samples: 64}
optimizer: {kind: layer-wise, lr: 0.003, min_lr: 0.0003}
training: {steps: 12, micro_batch_size: 4, warmup_steps: 3, eval_interval: 6, device: )",
                                       device, R"(}
comm_overlap: {bucket_size: 4096}
logging: {progress: false}
)"));
}

using TwinModel = TrainableGpt<GptModel<float>>;

// A "device" that is host memory: what the CUDA backend builds, with host memory and math.
class HostTwinBackend final : public DeviceTrainingBackend {
 public:
  DeviceInfo device_for(const ProcessGroup&) const override { return {0, "host twin", 1e15, 1}; }
  DeviceTraining build(const DeviceTrainingRequest& r) const override {
    auto model = std::make_unique<TwinModel>(r.model);
    optim::DataParallelOptimizer built = optim::make_layer_wise_data_parallel(
        model->params(), r.host_ddp.layout(), r.host_ddp.config(),
        DataParallelGroups::from(r.groups), r.groups.data_parallel,
        optim::muon_options(r.config.optimizer), optim::adamw_options(r.config.optimizer),
        host_buffer_memory(), optim::host_shard_math());
    built.optimizer->set_step_options({r.config.optimizer.clip_grad, false});
    std::vector<float*> values, grads;
    for (ParamId id = 0; id < model->params().size(); ++id) {
      values.push_back(built.ddp->param(id).as<float>());
      grads.push_back(built.ddp->main_grad(id).as<float>());
    }
    model->model().bind(std::move(values), std::move(grads));
    if (built.ddp->config().overlap_param_gather) {
      DistributedDataParallel* ddp = built.ddp.get();
      model->model().set_before_param_use(
          [ddp](ParamId id) { ddp->finish_param_sync(ddp->bucket_group_of(id)); });
    }
    ++builds;
    DeviceTraining out;
    out.model = std::move(model);
    out.ddp = std::move(built.ddp);
    out.optimizer = std::move(built.optimizer);
    out.description = "host twin";
    return out;
  }
  void copy_to_host(void* host, const void* device, std::size_t bytes) const override {
    std::memcpy(host, device, bytes);
    ++copies;
  }
  void copy_to_device(void* device, const void* host, std::size_t bytes) const override {
    std::memcpy(device, host, bytes);
    ++copies;
  }
  mutable int builds = 0, copies = 0;
};

// Installs the twin for one test and removes it after.
struct TwinInstalled {
  std::shared_ptr<HostTwinBackend> backend = std::make_shared<HostTwinBackend>();
  TwinInstalled() { set_device_training_backend(backend); }
  ~TwinInstalled() { set_device_training_backend(nullptr); }
};

TrainerOptions twin_test_options() {
  TrainerOptions o;
  o.quiet = true;
  return o;
}

void expect_twin_bits(const TrainingSummary& a, const TrainingSummary& b, std::size_t offset) {
  ASSERT_EQ(a.steps.size() + offset, b.steps.size());
  for (std::size_t i = 0; i < a.steps.size(); ++i) {
    EXPECT_EQ(a.steps[i].loss, b.steps[i + offset].loss) << "step " << i + offset + 1;
    EXPECT_EQ(a.steps[i].grad_norm, b.steps[i + offset].grad_norm) << "step " << i + offset + 1;
  }
  EXPECT_EQ(a.final_eval->eval_loss, b.final_eval->eval_loss);
}

TEST(DeviceTrainingSeam, TwinDeviceTrainsBitForBitAsTheCpuPath) {
  const ProcessGroupPtr world = init_mpi_world();
  const TrainingSummary cpu = run_training(seam_config("cpu"), world, twin_test_options());
  TwinInstalled twin;
  const TrainingSummary device = run_training(seam_config("cuda"), world, twin_test_options());
  EXPECT_EQ(twin.backend->builds, 1);
  EXPECT_GT(twin.backend->copies, 0) << "the initial weights are copied to the device";
  expect_twin_bits(device, cpu, 0);
  EXPECT_LT(cpu.steps.back().loss, cpu.steps.front().loss) << "the model learns";
}

TEST(DeviceTrainingSeam, CheckpointsMoveBetweenTheCpuAndTheDevice) {
  const ProcessGroupPtr world = init_mpi_world();
  const fs::path dir = test::shared_temp_dir(*world);
  TrainerOptions save_cpu = twin_test_options();
  save_cpu.save_dir = (dir / "cpu").string();
  save_cpu.save_interval = 4;
  const TrainingSummary cpu = run_training(seam_config("cpu"), world, save_cpu);
  TwinInstalled twin;
  // CPU checkpoint of step 4 resumed on the device, saving at step 8.
  TrainerOptions to_device = twin_test_options();
  to_device.load_dir = save_cpu.save_dir;
  to_device.load_step = 4;
  to_device.save_dir = (dir / "device").string();
  to_device.save_interval = 8;
  const TrainingSummary device = run_training(seam_config("cuda"), world, to_device);
  expect_twin_bits(device, cpu, 4);
  // The device's checkpoint of step 8 resumed on the CPU.
  TrainerOptions to_cpu = twin_test_options();
  to_cpu.load_dir = to_device.save_dir;
  to_cpu.load_step = 8;
  const TrainingSummary back = run_training(seam_config("cpu"), world, to_cpu);
  expect_twin_bits(back, cpu, 8);
  world->barrier()->wait();
  if (world->rank() == 0) fs::remove_all(dir);
}

TEST(DeviceTrainingSeam, WithoutABackendTheDeviceIsAConfigError) {
  const ProcessGroupPtr world = init_mpi_world();
  set_device_training_backend(nullptr);
  EXPECT_THROW(run_training(seam_config("cuda"), world, twin_test_options()), ConfigError);
}

}  // namespace
}  // namespace shardwise
