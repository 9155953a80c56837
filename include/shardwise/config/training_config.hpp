// TrainingConfig: everything `shardwise train` reads from its YAML file, one struct per section
// (model, data, optimizer, ddp, training, logging, comm_overlap, parallel). Keys in the file are
// exactly the field names below (ddp keys: see config/ddp_config.hpp).
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "shardwise/config/comm_overlap_config.hpp"
#include "shardwise/config/ddp_config.hpp"
#include "shardwise/config/enum_names.hpp"
#include "shardwise/config/optimizer_config.hpp"
#include "shardwise/core/dtype.hpp"

namespace shardwise {

enum class ModelArch { kGpt };
inline constexpr EnumName<ModelArch> kModelArchNames[] = {{ModelArch::kGpt, "gpt"}};
inline std::span<const EnumName<ModelArch>> enum_names(ModelArch) { return kModelArchNames; }

enum class PositionEmbedding { kLearned, kRope };
inline constexpr EnumName<PositionEmbedding> kPositionEmbeddingNames[] = {
    {PositionEmbedding::kLearned, "learned"}, {PositionEmbedding::kRope, "rope"}};
inline std::span<const EnumName<PositionEmbedding>> enum_names(PositionEmbedding) {
  return kPositionEmbeddingNames;
}

enum class DataSource { kSynthetic, kText, kBin };
inline constexpr EnumName<DataSource> kDataSourceNames[] = {
    {DataSource::kSynthetic, "synthetic"}, {DataSource::kText, "text"}, {DataSource::kBin, "bin"}};
inline std::span<const EnumName<DataSource>> enum_names(DataSource) { return kDataSourceNames; }

enum class SyntheticTask { kAddition, kSort };
inline constexpr EnumName<SyntheticTask> kSyntheticTaskNames[] = {
    {SyntheticTask::kAddition, "addition"}, {SyntheticTask::kSort, "sort"}};
inline std::span<const EnumName<SyntheticTask>> enum_names(SyntheticTask) {
  return kSyntheticTaskNames;
}

enum class LrSchedule { kCosine, kConstant };
inline constexpr EnumName<LrSchedule> kLrScheduleNames[] = {{LrSchedule::kCosine, "cosine"},
                                                            {LrSchedule::kConstant, "constant"}};
inline std::span<const EnumName<LrSchedule>> enum_names(LrSchedule) { return kLrScheduleNames; }

// Where the trainer runs the model, its buffers and the optimizer: the host, or each rank's CUDA
// device (chosen by local rank; a build with the CUDA training backend only).
enum class TrainingDevice { kCpu, kCuda };
inline constexpr EnumName<TrainingDevice> kTrainingDeviceNames[] = {
    {TrainingDevice::kCpu, "cpu"}, {TrainingDevice::kCuda, "cuda"}};
inline std::span<const EnumName<TrainingDevice>> enum_names(TrainingDevice) {
  return kTrainingDeviceNames;
}

// The model's matrix products: fp32, TF32 tensor cores, or bf16 inputs with fp32 accumulation.
// Weights, gradients and the optimizer stay fp32 (the master weights) in every case. The CPU
// model computes in fp32 only.
enum class TrainingPrecision { kFp32, kTf32, kBf16 };
inline constexpr EnumName<TrainingPrecision> kTrainingPrecisionNames[] = {
    {TrainingPrecision::kFp32, "fp32"},
    {TrainingPrecision::kTf32, "tf32"},
    {TrainingPrecision::kBf16, "bf16"}};
inline std::span<const EnumName<TrainingPrecision>> enum_names(TrainingPrecision) {
  return kTrainingPrecisionNames;
}

struct ModelConfig {
  ModelArch arch = ModelArch::kGpt;
  int layers = 2;
  int hidden = 64;
  int heads = 4;
  int ffn = 256;
  int vocab = 0;  // 0: the data source's vocabulary size
  int seq_len = 32;
  PositionEmbedding position = PositionEmbedding::kLearned;
  bool tied_embeddings = true;
  DType dtype = DType::kFloat32;  // fp32 or bf16
  double init_std = 0.02;
  std::int64_t seed = 1234;

  bool operator==(const ModelConfig&) const = default;
};

struct DataConfig {
  DataSource source = DataSource::kSynthetic;
  SyntheticTask task = SyntheticTask::kAddition;  // synthetic only
  int digits = 3;                                 // synthetic only: operand digits / list length
  std::string path;                               // text / bin: training data file
  std::string val_path;  // text / bin: validation file (empty: hold out from path)
  int eval_samples = 256;

  bool operator==(const DataConfig&) const = default;
};

// The "training" section: the loop itself.
struct TrainLoopConfig {
  std::int64_t steps = 200;
  int micro_batch_size = 8;
  int grad_accumulation = 1;
  std::int64_t warmup_steps = 10;
  LrSchedule lr_schedule = LrSchedule::kCosine;
  // Evaluate every N steps; the run always ends with one (as Megatron does), so 0 means only that.
  std::int64_t eval_interval = 50;
  std::int64_t seed = 1234;
  // Steps whose loss or grad norm is NaN/inf that may be skipped (no update applied, as Megatron
  // does) before the run stops; 0: the first such step stops the run.
  std::int64_t skip_nonfinite_steps = 0;
  TrainingDevice device = TrainingDevice::kCpu;
  TrainingPrecision precision = TrainingPrecision::kFp32;

  bool operator==(const TrainLoopConfig&) const = default;
};

struct LoggingConfig {
  std::int64_t log_interval = 10;
  std::string jsonl_path;  // empty: no JSONL metrics file
  std::string plot_path;   // empty: no loss plot
  bool progress = true;

  bool operator==(const LoggingConfig&) const = default;
};

struct ParallelConfig {
  int tp = 1;
  int pp = 1;
  int vp = 1;
  int cp = 1;
  int ep = 1;
  bool sequence_parallel = false;

  bool operator==(const ParallelConfig&) const = default;
};

struct TrainingConfig {
  ModelConfig model;
  DataConfig data;
  OptimizerConfig optimizer;
  DistributedDataParallelConfig ddp;
  TrainLoopConfig training;
  LoggingConfig logging;
  CommOverlapConfig comm_overlap;
  ParallelConfig parallel;

  // Equal sections (the ddp section key by key, see same_ddp_settings()).
  bool operator==(const TrainingConfig& other) const;
};

// Section names in file order.
std::span<const std::string_view> training_config_sections();
// Valid keys of one section; throws ConfigError for an unknown section.
std::vector<std::string_view> training_config_keys(std::string_view section);

// Loads a YAML file, then applies overrides "section.key=value" (value in YAML syntax; deeper
// paths such as comm_overlap.tp_comm_overlap_cfg.proj_fprop.num_sm=8 work too; an empty value or
// null unsets an optional key). Every key is checked: unknown sections / keys are rejected
// listing the valid ones, wrong types name the key and the expected type, and validate() runs on
// the result. ddp.use_distributed_optimizer and ddp.use_legacy_layer_wise_sync follow
// optimizer.kind (setting them to a contradicting value is an error). Errors are ConfigError
// (IoError when the file cannot be read), prefixed with the file name.
TrainingConfig load_training_config(const std::filesystem::path& path,
                                    const std::vector<std::string>& overrides = {});
// The same from YAML text; `source` names it in error messages.
TrainingConfig parse_training_config(std::string_view yaml_text,
                                     const std::vector<std::string>& overrides = {},
                                     std::string_view source = "<config>");

// Range and cross-section checks (hidden % heads, heads % tp, layers % (pp * vp), text/bin need
// a path, optimizer/ddp consistency, ...); throws ConfigError naming the field.
void validate(const TrainingConfig& config);

// Settings that are valid but probably not meant, one line each (e.g. warmup_steps > steps: the
// learning rate never leaves warmup).
std::vector<std::string> config_warnings(const TrainingConfig& config);

// Every key of every section, in file order; loading the YAML gives back an equal config.
std::string to_yaml(const TrainingConfig& config);
nlohmann::ordered_json to_json(const TrainingConfig& config);

// A TP-overlap config as printed in the comm_overlap section (slot -> fields or null).
nlohmann::ordered_json to_json(const TransformerLayerTPOverlapCfg& cfg);
// Block-style YAML of any JSON tree, with the number formatting to_yaml() uses.
std::string json_to_yaml(const nlohmann::ordered_json& value);

// The parallel facts setup() needs, from the config plus what only the launcher knows.
ModelParallelConfig model_parallel_config(const TrainingConfig& config, int world_size,
                                          GpuArch gpu_arch = GpuArch::kNone);

// Runs config.comm_overlap.setup() for this world, updating config.optimizer and config.ddp.
CommOverlapResolution resolve_comm_overlap(TrainingConfig& config, int world_size,
                                           GpuArch gpu_arch = GpuArch::kNone);

// The resolution as JSON (for `shardwise config resolve` and logs).
nlohmann::ordered_json to_json(const CommOverlapResolution& resolution);

}  // namespace shardwise
