// Trainer steps 2 and 3 on a device (training.device other than cpu): the device check before
// anything is allocated, then the device's model, DDP and optimizer next to the host mirror.
#include "shardwise/core/error.hpp"
#include "shardwise/train/memory_estimate.hpp"
#include "trainer_guards.hpp"
#include "training_run.hpp"

namespace shardwise::train_detail {
namespace {

// ConfigError when this rank has no device or the run does not fit in the device's free memory
// (the estimate of require_memory, times the ranks sharing the device).
void check_device(const DeviceTrainingBackend& backend, const ProcessGroup& world,
                  const GptConfig& model, const TrainingConfig& config, int optimizer_shards) {
  const DeviceTrainingBackend::DeviceInfo info = backend.device_for(world);
  const MemoryEstimate e = estimate_training_memory(model, config.training.micro_batch_size,
                                                    config.data.eval_samples, optimizer_shards);
  const double needed = e.total() * info.ranks_sharing;
  SW_REQUIRE(needed <= info.free_bytes, ConfigError, "this run needs an estimated ",
             format_bytes(e.total()), " of device memory per rank x ", info.ranks_sharing,
             " rank(s) on device ", info.device, " (", info.name, ") = ", format_bytes(needed),
             ", more than its ", format_bytes(info.free_bytes),
             " free: reduce model.layers, model.hidden, model.ffn, model.vocab, model.seq_len or "
             "training.micro_batch_size");
}

}  // namespace

void require_training_device(TrainingModel& m, const RunContext& run, ProcessGroup& world) {
  if (run.config.training.device == TrainingDevice::kCpu) return;
  m.backend = device_training_backend();
  SW_REQUIRE(m.backend != nullptr, ConfigError,
             "training.device: ", to_string(run.config.training.device),
             ": this build of shardwise has no CUDA training (it was built without nvcc)");
  check_on_every_rank(
      world,
      [&] {
        check_device(*m.backend, world, m.model_config, run.config,
                     shards_optimizer_state(m.kind) ? run.dp : 1);
      },
      "no usable device for this run");
}

void build_device_training(TrainingModel& m, const RunContext& run) {
  if (m.backend == nullptr) return;
  m.device = std::make_unique<DeviceTraining>(
      m.backend->build(DeviceTrainingRequest{run.config, m.model_config, m.ddp(), run.groups}));
  m.push_to_device();  // the initial weights, made on the host as a CPU run makes them
}

void TrainingModel::pull_from_device() {
  copy_training_state_to_host(*backend, *device, ddp(), *optimizer);
}

void TrainingModel::push_to_device() {
  copy_training_state_to_device(*backend, ddp(), *optimizer, *device);
}

}  // namespace shardwise::train_detail
