// Internal to the trainer: the named steps run_training (trainer.cpp) runs top to bottom, and the
// state they share. Read trainer.cpp first; each step lives in its own file:
//   parallel_state.cpp    groups, resolved config, output paths
//   model_setup.cpp       dataset + GPT model, DDP buffers bound to the model, the optimizer
//   trainer_resume.cpp    resume from a checkpoint
//   training_step.cpp     one optimizer step (micro-batches, grad sync, non-finite handling)
//   held_out_eval.cpp     evaluation on the held-out split
//   trainer_checkpoint.cpp saving a checkpoint of the run
//   training_report.cpp   console lines, progress bar, JSONL metrics, the loss plot
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "shardwise/checkpoint/checkpoint.hpp"
#include "shardwise/comm/process_group.hpp"
#include "shardwise/config/training_config.hpp"
#include "shardwise/ddp/distributed_data_parallel.hpp"
#include "shardwise/model/gpt_model.hpp"
#include "shardwise/optim/data_parallel_setup.hpp"
#include "shardwise/train/device_training.hpp"
#include "shardwise/train/nonfinite_steps.hpp"
#include "shardwise/train/token_dataset.hpp"
#include "shardwise/train/trainer.hpp"

namespace shardwise::train_detail {

// Who this rank is and what the run writes, decided before any model exists.
struct RunContext {
  TrainingConfig config;  // with the communication-overlap resolution applied
  CommOverlapResolution resolution;
  ParallelGroups groups;
  int world_size = 1, dp = 1, rank = 0;  // rank: in the data-parallel group
  int tp = 1, tp_rank = 0;               // the tensor-parallel group: size and this rank
  bool is_rank0 = false;                 // world rank 0: the rank that writes files
  bool verbose = false;                  // rank 0 and not quiet: the rank that talks
  ProgressMode progress = ProgressMode::kAuto;
  std::string jsonl, plot;        // the options' values win over the config's
  std::int64_t global_batch = 0;  // micro_batch_size x grad_accumulation x dp
  ProcessGroup& dp_group() const { return *groups.data_parallel; }
  ProcessGroup& tp_group() const { return *groups.tensor_parallel; }
};

// Checks what the reference trainer supports, resolves the overlap settings and builds groups.
RunContext build_parallel_state(const TrainingConfig& config, const ProcessGroupPtr& world,
                                const TrainerOptions& options);

// Everything one training step touches. Members are destroyed in reverse order: the optimizer
// before the DDP buffers it points into, those before the model bound to them.
// The global batch from `first_step` on (until the next segment): a resume may change dp, so
// trainer.consumed_samples is the sum over the segments of the run's history.
struct BatchSegment {
  std::int64_t first_step = 0, global_batch = 0;
};

struct TrainingModel {
  std::unique_ptr<TokenDataset> dataset;
  // Since step 0, across resumes; saved with each checkpoint ("batch_history") so that a resume
  // can check trainer.consumed_samples against it.
  std::vector<BatchSegment> batch_history;
  GptConfig model_config;
  OptimizerKind kind = OptimizerKind::kLayerWise;
  // The host model, DDP and optimizer. They train on the CPU; on a device they are the run's
  // host mirror (layout, initial weights, checkpoints, the weights handed over at the end).
  std::unique_ptr<GptModel<float>> model;
  std::unique_ptr<TrainableModel> host_model;  // `model` behind the trainer's interface
  std::vector<std::unique_ptr<DistributedDataParallel>> ddps;
  std::unique_ptr<optim::Optimizer> optimizer;
  // training.device other than cpu: the backend and what it built.
  std::shared_ptr<const DeviceTrainingBackend> backend;
  std::unique_ptr<DeviceTraining> device;
  DistributedDataParallel& ddp() const { return *ddps.front(); }
  // What trains: the device's model, DDP and optimizer when there is one, else the host's.
  TrainableModel& net() const { return device ? *device->model : *host_model; }
  DistributedDataParallel& step_ddp() const { return device ? *device->ddp : ddp(); }
  optim::Optimizer& step_optimizer() const { return device ? *device->optimizer : *optimizer; }
  // Device runs: the device's params and optimizer state into the host mirror and back.
  void pull_from_device();
  void push_to_device();
};

// The dataset and the GPT model (after the memory check), not yet bound to any buffer.
TrainingModel build_model_and_data(const RunContext& run, ProcessGroup& world);
// Wraps the model's params in DDP buffers, binds the model to them, initialises the weights and
// builds the optimizer over the buffers.
void build_ddp_and_optimizer(TrainingModel& m, const RunContext& run);
// training.device other than cpu (device_run.cpp): sets m.backend, and refuses (ConfigError, on
// every rank) a rank without a device or a run that does not fit in its free memory.
void require_training_device(TrainingModel& m, const RunContext& run, ProcessGroup& world);
// With m.backend: the device's model, DDP and optimizer, given the host mirror's weights.
void build_device_training(TrainingModel& m, const RunContext& run);

// The model's params as complete views into the DDP param buffer (what a checkpoint stores).
std::vector<ModelTensor> model_tensors(const TrainingModel& m);

// Where a resumed run continues.
struct ResumePoint {
  std::string directory;
  std::int64_t step = 0, consumed_samples = 0;
};
// Loads options.load_dir (if set) into the model and optimizer; nullopt when not resuming. Sets
// m.batch_history. A checkpoint whose trainer.consumed_samples disagrees with its batch history
// (or with step x global batch when it has none) is refused: it would resume at the wrong data.
std::optional<ResumePoint> resume_from_checkpoint(TrainingModel& m, const RunContext& run,
                                                  const TrainerOptions& options);

// Saves the current weights and optimizer state as checkpoint `step`; returns its directory.
std::string save_training_checkpoint(TrainingModel& m, const RunContext& run,
                                     const TrainerOptions& options, std::int64_t step,
                                     std::int64_t consumed_samples);

// Held-out loss and exact-match accuracy over the dataset's whole validation split: rank r of
// the group evaluates the r-th of `size` contiguous slices; the sums are reduced exactly.
EvalMetrics evaluate_held_out(TrainableModel& model, const TokenDataset& data,
                              ProcessGroup& dp_group, std::int64_t step);

// One optimizer step: which samples, at which learning rate.
struct StepPlan {
  std::int64_t step = 0;  // 0-based; the metrics report step + 1
  double lr = 0;
  std::int64_t first_sample = 0;  // consumed samples before this step
  int micro_batch_size = 1, grad_accumulation = 1;
};
// Runs forward/backward over the micro-batches, the grad sync and the optimizer step. A
// non-finite loss never reaches the optimizer and a non-finite grad norm makes it skip the
// update; `nonfinite` then skips the step or throws NonFiniteTrainingError (on every rank).
// Fills every StepMetrics field.
StepMetrics run_training_step(TrainingModel& m, ProcessGroup& dp_group, NonFiniteSteps& nonfinite,
                              const StepPlan& plan);
// The groups the data-parallel sync communicates in: the DP group and, with layer-wise shard
// groups, the shard and replica groups (each once), so traffic figures count all of them.
std::vector<const ProcessGroup*> data_parallel_comm_groups(const TrainingModel& m,
                                                           const ProcessGroup& dp_group);

}  // namespace shardwise::train_detail
