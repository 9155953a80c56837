#include "shardwise/config/training_config.hpp"

#include "shardwise/core/error.hpp"

namespace shardwise {
namespace {

void require_min(std::int64_t value, std::int64_t low, const char* field) {
  SW_REQUIRE(value >= low, ConfigError, field, " must be >= ", low, " (got ", value, ")");
}

void validate_model(const ModelConfig& m) {
  require_min(m.layers, 1, "model.layers");
  require_min(m.hidden, 1, "model.hidden");
  require_min(m.heads, 1, "model.heads");
  SW_REQUIRE(m.hidden % m.heads == 0, ConfigError, "model.hidden (", m.hidden,
             ") must be divisible by model.heads (", m.heads, ")");
  require_min(m.ffn, 1, "model.ffn");
  require_min(m.vocab, 0, "model.vocab");
  require_min(m.seq_len, 1, "model.seq_len");
  SW_REQUIRE(m.dtype == DType::kFloat32 || m.dtype == DType::kBFloat16, ConfigError,
             "model.dtype must be fp32 or bf16 (got ", dtype_name(m.dtype), ")");
  SW_REQUIRE(m.init_std > 0.0, ConfigError, "model.init_std must be > 0 (got ", m.init_std, ")");
  require_min(m.seed, 0, "model.seed");
}

void validate_data(const DataConfig& d) {
  require_min(d.digits, 1, "data.digits");
  require_min(d.eval_samples, 0, "data.eval_samples");
  if (d.source != DataSource::kSynthetic) {
    SW_REQUIRE(!d.path.empty(), ConfigError, "data.path is required for data.source '",
               to_string(d.source), "'");
  }
}

void validate_training(const TrainLoopConfig& t) {
  require_min(t.steps, 1, "training.steps");
  require_min(t.micro_batch_size, 1, "training.micro_batch_size");
  require_min(t.grad_accumulation, 1, "training.grad_accumulation");
  require_min(t.warmup_steps, 0, "training.warmup_steps");
  require_min(t.eval_interval, 0, "training.eval_interval");
  require_min(t.seed, 0, "training.seed");
  require_min(t.skip_nonfinite_steps, 0, "training.skip_nonfinite_steps");
}

void validate_parallel(const ParallelConfig& p, const ModelConfig& m) {
  require_min(p.tp, 1, "parallel.tp");
  require_min(p.pp, 1, "parallel.pp");
  require_min(p.vp, 1, "parallel.vp");
  require_min(p.cp, 1, "parallel.cp");
  require_min(p.ep, 1, "parallel.ep");
  SW_REQUIRE(p.vp == 1 || p.pp > 1, ConfigError, "parallel.vp = ", p.vp,
             " needs pipeline parallelism (parallel.pp > 1)");
  SW_REQUIRE(m.heads % p.tp == 0, ConfigError, "model.heads (", m.heads,
             ") must be divisible by parallel.tp (", p.tp, ")");
  SW_REQUIRE(m.ffn % p.tp == 0, ConfigError, "model.ffn (", m.ffn,
             ") must be divisible by parallel.tp (", p.tp, ")");
  SW_REQUIRE(m.layers % (p.pp * p.vp) == 0, ConfigError, "model.layers (", m.layers,
             ") must be divisible by parallel.pp * parallel.vp (", p.pp * p.vp, ")");
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
  validate(static_cast<const CommOverlapSettings&>(config.comm_overlap));
  validate_parallel(config.parallel, config.model);
}

std::vector<std::string> config_warnings(const TrainingConfig& config) {
  std::vector<std::string> warnings;
  const TrainLoopConfig& t = config.training;
  // Accepted, as Megatron does: the schedule simply never leaves its warmup.
  if (t.warmup_steps > t.steps) {
    warnings.push_back(str_cat("training.warmup_steps (", t.warmup_steps, ") > training.steps (",
                               t.steps, "): the learning rate stays in warmup, reaching ",
                               t.steps, "/", t.warmup_steps, " of optimizer.lr"));
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
