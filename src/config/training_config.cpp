#include "shardwise/config/training_config.hpp"

#include "shardwise/core/checked_size.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/core/message_text.hpp"

namespace shardwise {
namespace {

void require_min(std::int64_t value, std::int64_t low, const char* field) {
  SW_REQUIRE(value >= low, ConfigError, field, " must be >= ", low, " (got ", value, ")");
}

// In [low, high]: `high` is a bound no real job reaches (core/checked_size.hpp); above it the
// value would only make the run endless or overflow what is computed from it.
void require_range(std::int64_t value, std::int64_t low, std::int64_t high, const char* field) {
  require_min(value, low, field);
  SW_REQUIRE(value <= high, ConfigError, field, " must be <= ", high, " (got ", value,
             "; no real job is that large)");
}

void validate_model(const ModelConfig& m) {
  require_range(m.layers, 1, kMaxLayers, "model.layers");
  require_range(m.hidden, 1, kMaxModelDimension, "model.hidden");
  require_range(m.heads, 1, kMaxModelDimension, "model.heads");
  SW_REQUIRE(m.hidden % m.heads == 0, ConfigError, "model.hidden (", m.hidden,
             ") must be divisible by model.heads (", m.heads, ")");
  SW_REQUIRE(m.position != PositionEmbedding::kRope || (m.hidden / m.heads) % 2 == 0, ConfigError,
             "model.position: rope needs an even head dimension (model.hidden / model.heads), "
             "got ",
             m.hidden / m.heads);
  require_range(m.ffn, 1, kMaxModelDimension, "model.ffn");
  require_range(m.vocab, 0, kMaxModelDimension, "model.vocab");
  require_range(m.seq_len, 1, kMaxModelDimension, "model.seq_len");
  SW_REQUIRE(m.dtype == DType::kFloat32 || m.dtype == DType::kBFloat16, ConfigError,
             "model.dtype must be fp32 or bf16 (got ", dtype_name(m.dtype), ")");
  SW_REQUIRE(m.init_std > 0.0, ConfigError, "model.init_std must be > 0 (got ", m.init_std, ")");
  require_min(m.seed, 0, "model.seed");
}

// Paths are recorded in checkpoint manifests and config dumps, which are JSON: UTF-8 only.
void require_utf8(const std::string& value, const char* key) {
  const std::size_t bad = first_invalid_utf8(value);
  SW_REQUIRE(bad == value.size(), ConfigError, key, " '", printable(value, 4096),
             "' is not valid UTF-8 (byte ", bad,
             "): checkpoints and config dumps record it as JSON text, which must be UTF-8");
}

void validate_data(const DataConfig& d) {
  require_utf8(d.path, "data.path");
  require_utf8(d.val_path, "data.val_path");
  require_min(d.digits, 1, "data.digits");
  // Every run ends with a held-out evaluation: with no samples its loss is 0 / 0 (text data ran
  // the whole training first, then stopped on that "non-finite" loss).
  require_range(d.eval_samples, 1, kMaxBatchFactor, "data.eval_samples");
  if (d.source == DataSource::kSynthetic) {
    // The tasks' limits (synthetic_task.cpp): numbers of up to 9 digits.
    SW_REQUIRE(d.digits <= 9, ConfigError,
               "data.digits must be <= 9 for data.source synthetic (got ", d.digits, ")");
    // A file named with the source left at its default trained on the synthetic task instead.
    for (const auto& [path, field] :
         {std::pair{&d.path, "data.path"}, {&d.val_path, "data.val_path"}}) {
      SW_REQUIRE(path->empty(), ConfigError, field, " is '", printable(*path, 64),
                 "' but data.source is synthetic, which reads no file: set data.source to text "
                 "or bin (or leave ",
                 field, " empty)");
    }
  } else {
    SW_REQUIRE(!d.path.empty(), ConfigError, "data.path is required for data.source '",
               to_string(d.source), "'");
  }
}

void validate_training(const TrainLoopConfig& t) {
  require_range(t.steps, 1, kMaxStep, "training.steps");
  require_range(t.micro_batch_size, 1, kMaxBatchFactor, "training.micro_batch_size");
  require_range(t.grad_accumulation, 1, kMaxBatchFactor, "training.grad_accumulation");
  require_range(t.warmup_steps, 0, kMaxStep, "training.warmup_steps");
  require_range(t.eval_interval, 0, kMaxStep, "training.eval_interval");
  require_min(t.seed, 0, "training.seed");
  require_min(t.skip_nonfinite_steps, 0, "training.skip_nonfinite_steps");
  SW_REQUIRE(t.precision == TrainingPrecision::kFp32 || t.device == TrainingDevice::kCuda,
             ConfigError, "training.precision: ", to_string(t.precision),
             " needs training.device: cuda (the CPU model computes in fp32)");
  // The sample index of the last step, per data-parallel replica (the trainer multiplies in dp).
  checked_product<ConfigError>({{"training.steps", t.steps},
                                {"training.micro_batch_size", t.micro_batch_size},
                                {"training.grad_accumulation", t.grad_accumulation}},
                               kMaxSampleIndex, "samples the run would consume");
}

void validate_parallel(const ParallelConfig& p, const ModelConfig& m) {
  require_range(p.tp, 1, kMaxParallelSize, "parallel.tp");
  require_range(p.pp, 1, kMaxParallelSize, "parallel.pp");
  require_range(p.vp, 1, kMaxParallelSize, "parallel.vp");
  require_range(p.cp, 1, kMaxParallelSize, "parallel.cp");
  require_range(p.ep, 1, kMaxParallelSize, "parallel.ep");
  // Every rank holds a tp x pp x cp slice of the model: the product is at most the world.
  checked_product<ConfigError>(
      {{"parallel.tp", p.tp}, {"parallel.pp", p.pp}, {"parallel.cp", p.cp}}, kMaxParallelSize,
      "model-parallel size");
  const std::int64_t stages = checked_product<ConfigError>(
      {{"parallel.pp", p.pp}, {"parallel.vp", p.vp}}, kMaxLayers, "pipeline stages");
  SW_REQUIRE(p.vp == 1 || p.pp > 1, ConfigError, "parallel.vp = ", p.vp,
             " needs pipeline parallelism (parallel.pp > 1)");
  SW_REQUIRE(m.heads % p.tp == 0, ConfigError, "model.heads (", m.heads,
             ") must be divisible by parallel.tp (", p.tp, ")");
  SW_REQUIRE(m.ffn % p.tp == 0, ConfigError, "model.ffn (", m.ffn,
             ") must be divisible by parallel.tp (", p.tp, ")");
  SW_REQUIRE(m.layers % stages == 0, ConfigError, "model.layers (", m.layers,
             ") must be divisible by parallel.pp * parallel.vp (", stages, ")");
}

void validate_ddp_against_optimizer(const DistributedDataParallelConfig& ddp,
                                    const OptimizerConfig& opt) {
  SW_REQUIRE(ddp.use_distributed_optimizer == opt.use_distributed_optimizer(), ConfigError,
             "ddp.use_distributed_optimizer = ", ddp.use_distributed_optimizer ? "true" : "false",
             " contradicts optimizer.kind '", to_string(opt.kind),
             "' (leave it out: the optimizer kind decides it)");
  const bool legacy = opt.kind == OptimizerKind::kLegacyLayerWise;
  SW_REQUIRE(ddp.use_legacy_param_sync == legacy, ConfigError,
             "ddp.use_legacy_layer_wise_sync = ", ddp.use_legacy_param_sync ? "true" : "false",
             " contradicts optimizer.kind '", to_string(opt.kind),
             "' (leave it out: the optimizer kind decides it)");
}

}  // namespace

void validate(const TrainingConfig& config) {
  validate_model(config.model);
  validate_data(config.data);
  validate(config.optimizer);
  validate_ddp_against_optimizer(config.ddp, config.optimizer);
  config.ddp.validate();
  validate_training(config.training);
  require_min(config.logging.log_interval, 1, "logging.log_interval");
  require_utf8(config.logging.jsonl_path, "logging.jsonl_path");
  require_utf8(config.logging.plot_path, "logging.plot_path");
  validate(static_cast<const CommOverlapSettings&>(config.comm_overlap));
  validate_parallel(config.parallel, config.model);
}

std::vector<std::string> config_warnings(const TrainingConfig& config) {
  std::vector<std::string> warnings;
  const TrainLoopConfig& t = config.training;
  // Accepted, as Megatron does: the schedule simply never leaves its warmup.
  if (t.warmup_steps > t.steps) {
    warnings.push_back(str_cat("training.warmup_steps (", t.warmup_steps, ") > training.steps (",
                               t.steps, "): the learning rate stays in warmup, reaching ", t.steps,
                               "/", t.warmup_steps, " of optimizer.lr"));
  }
  // The synthetic tasks fix their own sample length (from data.digits); a seq_len changed from
  // the default has no effect there, which the user should hear about.
  if (config.data.source == DataSource::kSynthetic &&
      config.model.seq_len != ModelConfig{}.seq_len) {
    warnings.push_back(str_cat("model.seq_len (", config.model.seq_len,
                               ") is ignored for data.source synthetic: the task's samples have "
                               "a length set by data.digits"));
  }
  if (config.data.source != DataSource::kSynthetic && config.data.digits != DataConfig{}.digits) {
    warnings.push_back(str_cat("data.digits (", config.data.digits, ") is ignored for data.source ",
                               to_string(config.data.source),
                               ": it sets the synthetic tasks' operand length only"));
  }
  return warnings;
}

ModelParallelConfig model_parallel_config(const TrainingConfig& config, int world_size,
                                          GpuArch gpu_arch) {
  ModelParallelConfig mp;
  mp.tp = config.parallel.tp;
  mp.pp = config.parallel.pp;
  mp.vp = config.parallel.vp;
  mp.cp = config.parallel.cp;
  mp.ep = config.parallel.ep;
  mp.sequence_parallel = config.parallel.sequence_parallel;
  mp.world_size = world_size;
  mp.gpu_arch = gpu_arch;
  mp.hidden_size = config.model.hidden;
  mp.micro_batch_size = config.training.micro_batch_size;
  mp.seq_length = config.model.seq_len;
  mp.precision = std::string(dtype_name(config.model.dtype));
  return mp;
}

CommOverlapResolution resolve_comm_overlap(TrainingConfig& config, int world_size,
                                           GpuArch gpu_arch) {
  return config.comm_overlap.setup(model_parallel_config(config, world_size, gpu_arch),
                                   config.optimizer, config.ddp);
}

nlohmann::ordered_json to_json(const CommOverlapResolution& r) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  auto optional = [](const auto& value) {
    return value ? nlohmann::ordered_json(*value) : nlohmann::ordered_json(nullptr);
  };
  out["data_parallel_size"] = r.data_parallel_size;
  out["tp_comm_overlap"] = r.tp_comm_overlap;
  out["tp_comm_overlap_cfg_source"] = r.tp_comm_overlap_cfg_source;
  nlohmann::ordered_json backend = nlohmann::ordered_json::object();
  // No structured binding here: clang 14 (the fuzz build) cannot capture one in a lambda.
  for (const auto& entry : r.tp_comm_overlap_backend_cfg) {
    std::visit([&](const auto& v) { backend[entry.first] = v; }, entry.second);
  }
  out["tp_comm_overlap_backend_cfg"] = backend;
  out["tp_comm_bootstrap_backend"] = optional(r.tp_comm_bootstrap_backend);
  out["overlap_p2p_comm"] = r.overlap_p2p_comm;
  out["batch_p2p_comm"] = r.batch_p2p_comm;
  out["defer_embedding_wgrad_compute"] = r.defer_embedding_wgrad_compute;
  out["wgrad_deferral_limit"] = r.wgrad_deferral_limit;
  out["data_parallel_overlap_applied"] = r.data_parallel_overlap_applied;
  out["overlap_grad_reduce"] = r.overlap_grad_reduce;
  out["overlap_param_gather"] = r.overlap_param_gather;
  out["overlap_param_gather_with_optimizer_step"] = r.overlap_param_gather_with_optimizer_step;
  out["align_param_gather"] = r.align_param_gather;
  out["bucket_size"] = optional(r.bucket_size);
  out["cuda_device_max_connections"] = optional(r.cuda_device_max_connections);
  return out;
}

}  // namespace shardwise
