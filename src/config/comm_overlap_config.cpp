#include "shardwise/config/comm_overlap_config.hpp"

#include "shardwise/config/comm_overlap_presets.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/core/logging.hpp"

namespace shardwise {
namespace {

constexpr std::int64_t kOverlapBucketSize = 128LL * 1024 * 1024;  // elements

void require_at_least_one(int value, const char* field) {
  SW_REQUIRE(value >= 1, ConfigError, field, " must be >= 1 (got ", value, ")");
}

// Checks the layout and returns the data-parallel size it implies.
int resolve_data_parallel_size(const ModelParallelConfig& mp, std::optional<int> user_dp) {
  require_at_least_one(mp.tp, "parallel.tp");
  require_at_least_one(mp.pp, "parallel.pp");
  require_at_least_one(mp.vp, "parallel.vp");
  require_at_least_one(mp.cp, "parallel.cp");
  require_at_least_one(mp.ep, "parallel.ep");
  SW_REQUIRE(mp.vp == 1 || mp.pp > 1, ConfigError, "parallel.vp = ", mp.vp,
             " needs pipeline parallelism (parallel.pp > 1)");
  if (user_dp && mp.data_parallel_size) {
    SW_REQUIRE(*user_dp == *mp.data_parallel_size, ConfigError,
               "comm_overlap.data_parallel_size (", *user_dp,
               ") disagrees with the data-parallel size of the run (", *mp.data_parallel_size, ")");
  }
  std::optional<int> dp = user_dp ? user_dp : mp.data_parallel_size;
  if (dp) require_at_least_one(*dp, "comm_overlap.data_parallel_size");
  if (mp.world_size) {
    const int world = *mp.world_size;
    require_at_least_one(world, "world_size");
    const int model_parallel = mp.tp * mp.pp * mp.cp;
    SW_REQUIRE(world % model_parallel == 0, ConfigError, "world_size ", world,
               " is not divisible by tp * pp * cp = ", model_parallel);
    if (dp) {
      SW_REQUIRE(world % *dp == 0, ConfigError, "comm_overlap.data_parallel_size ", *dp,
                 " does not divide world_size ", world);
      SW_REQUIRE(*dp == world / model_parallel, ConfigError, "comm_overlap.data_parallel_size ",
                 *dp, " != world_size / (tp * pp * cp) = ", world / model_parallel);
    }
    dp = world / model_parallel;
  }
  const int data_parallel = dp.value_or(1);
  SW_REQUIRE((data_parallel * mp.cp) % mp.ep == 0, ConfigError, "parallel.ep = ", mp.ep,
             " must divide dp * cp = ", data_parallel * mp.cp);
  return data_parallel;
}

void warn(CommOverlapResolution& out, std::string message) {
  log::warning(message);
  out.warnings.push_back(std::move(message));
}

}  // namespace

bool tp_comm_overlap_backend_available() { return false; }

void validate(const CommOverlapSettings& config) {
  if (config.tp_comm_overlap_cfg) {
    validate(*config.tp_comm_overlap_cfg, "comm_overlap.tp_comm_overlap_cfg");
  }
  if (config.tp_comm_bootstrap_backend) {
    const std::string& backend = *config.tp_comm_bootstrap_backend;
    SW_REQUIRE(backend == "nccl" || backend == "mpi" || backend == "gloo", ConfigError,
               "comm_overlap.tp_comm_bootstrap_backend: unknown backend '", backend,
               "' (valid: nccl, mpi, gloo)");
  }
  if (config.bucket_size) {
    SW_REQUIRE(*config.bucket_size >= 1, ConfigError, "comm_overlap.bucket_size must be >= 1 (got ",
               *config.bucket_size, ")");
  }
  if (config.wgrad_deferral_limit) {
    SW_REQUIRE(*config.wgrad_deferral_limit >= -1, ConfigError,
               "comm_overlap.wgrad_deferral_limit must be >= -1 (got ",
               *config.wgrad_deferral_limit, ")");
  }
  if (config.data_parallel_size) {
    require_at_least_one(*config.data_parallel_size, "comm_overlap.data_parallel_size");
  }
}

std::optional<int> recommended_cuda_device_max_connections(const ModelParallelConfig& mp,
                                                           int data_parallel_size) {
  if (mp.gpu_arch == GpuArch::kNone) return std::nullopt;
  const bool tp_or_cp = mp.tp > 1 || mp.cp > 1;
  if (compute_capability_major(mp.gpu_arch) > 9) {
    // Blackwell: many connections let DP/PP traffic run beside TP/CP kernels.
    if (tp_or_cp && (data_parallel_size > 1 || mp.pp > 1)) return 32;
  } else if (tp_or_cp && !mp.moe_a2a_overlap) {
    // Hopper and older: one connection keeps TP/CP communication kernels in launch order.
    return 1;
  }
  return 8;
}

void CommOverlapConfig::finalize() {
  if (!user_) user_ = static_cast<const CommOverlapSettings&>(*this);
}

CommOverlapResolution CommOverlapConfig::setup(const ModelParallelConfig& mp,
                                               OptimizerConfig& optimizer_config,
                                               DistributedDataParallelConfig& ddp_config) {
  finalize();
  const CommOverlapSettings& user = *user_;
  validate(user);

  CommOverlapResolution out;
  out.data_parallel_size = resolve_data_parallel_size(mp, user.data_parallel_size);
  const int dp = out.data_parallel_size;
  const bool interleaved = mp.pp > 1 && mp.vp > 1;

  // Tensor parallel.
  bool tp_overlap = user.tp_comm_overlap.value_or(false);
  if (tp_overlap) {
    std::string reason;
    if (mp.tp < 2) {
      reason = str_cat("tensor parallel size is ", mp.tp, " (needs tp >= 2)");
    } else if (!mp.sequence_parallel) {
      reason = "sequence parallelism is off (TP overlap needs sequence_parallel = true)";
    } else if (!mp.tp_overlap_backend_available) {
      reason =
          "no TP-overlap backend is available (shardwise has no userbuffers implementation; "
          "Transformer Engine provides one)";
    }
    if (!reason.empty()) {
      warn(out, str_cat("disabling tp_comm_overlap: ", reason));
      tp_overlap = false;
    }
  } else if (user.tp_comm_overlap_cfg) {
    warn(out, "comm_overlap.tp_comm_overlap_cfg is ignored because tp_comm_overlap is off");
  }
  out.tp_comm_overlap = tp_overlap;
  if (tp_overlap) {
    if (user.tp_comm_overlap_cfg) {
      out.tp_comm_overlap_cfg = user.tp_comm_overlap_cfg;
      out.tp_comm_overlap_cfg_source = "user";
    } else {
      CommOverlapPresetKey run;
      run.precision = mp.precision;
      run.gpu = mp.gpu_arch;
      run.hidden = mp.hidden_size;
      run.tp = mp.tp;
      run.cp = mp.cp;
      run.micro_batch_size = mp.micro_batch_size;
      run.seq_length = mp.seq_length;
      run.lora = mp.lora;
      if (auto name = find_matching_preset(run)) {
        out.tp_comm_overlap_cfg = comm_overlap_preset(*name);
        out.tp_comm_overlap_cfg_source = str_cat("preset:", *name);
        log::info("tp_comm_overlap: using preset ", *name);
      } else {
        out.tp_comm_overlap_cfg_source = "backend-default";
        warn(out,
             "tp_comm_overlap: no tp_comm_overlap_cfg given and no preset matches this run; the "
             "TP-overlap backend uses its default config");
      }
    }
    if (out.tp_comm_overlap_cfg) {
      out.tp_comm_overlap_backend_cfg = to_backend_map(*out.tp_comm_overlap_cfg);
    }
    out.tp_comm_bootstrap_backend = user.tp_comm_bootstrap_backend.value_or("nccl");
  }
  out.defer_embedding_wgrad_compute = user.defer_embedding_wgrad_compute.value_or(false);
  out.wgrad_deferral_limit = user.wgrad_deferral_limit.value_or(-1);

  // Pipeline parallel.
  out.overlap_p2p_comm = user.overlap_p2p_comm.value_or(interleaved);
  out.batch_p2p_comm = user.batch_p2p_comm.value_or(mp.pp > 1 && !interleaved);
  if (mp.pp > 1) {
    SW_REQUIRE(!(out.overlap_p2p_comm && out.batch_p2p_comm), ConfigError,
               "comm_overlap.overlap_p2p_comm and comm_overlap.batch_p2p_comm cannot both be on");
    SW_REQUIRE(!out.overlap_p2p_comm || interleaved, ConfigError,
               "comm_overlap.overlap_p2p_comm needs the interleaved pipeline schedule (vp > 1)");
  }

  // Data parallel: only the distributed optimizer has the reduce-scatter / all-gather to overlap.
  if (optimizer_config.use_distributed_optimizer()) {
    const bool multi = dp > 1;
    out.data_parallel_overlap_applied = true;
    out.bucket_size = user.bucket_size ? user.bucket_size
                                       : (multi ? std::optional(kOverlapBucketSize) : std::nullopt);
    out.overlap_grad_reduce = user.overlap_grad_reduce.value_or(multi);
    out.overlap_param_gather = user.overlap_param_gather.value_or(multi);
    // Aligning the gathers only means something when they overlap.
    out.align_param_gather =
        user.align_param_gather.value_or(out.overlap_param_gather && interleaved);
    SW_REQUIRE(!out.align_param_gather || out.overlap_param_gather, ConfigError,
               "comm_overlap.align_param_gather needs overlap_param_gather");
    out.overlap_param_gather_with_optimizer_step =
        user.overlap_param_gather_with_optimizer_step.value_or(false);
    if (out.overlap_param_gather_with_optimizer_step) {
      SW_REQUIRE(out.overlap_param_gather, ConfigError,
                 "comm_overlap.overlap_param_gather_with_optimizer_step needs "
                 "overlap_param_gather");
      SW_REQUIRE(interleaved, ConfigError,
                 "comm_overlap.overlap_param_gather_with_optimizer_step needs the interleaved "
                 "pipeline schedule (pp > 1 and vp > 1)");
    }
    optimizer_config.overlap_param_gather_with_optimizer_step =
        out.overlap_param_gather_with_optimizer_step;
    ddp_config.overlap_grad_reduce = out.overlap_grad_reduce;
    ddp_config.overlap_param_gather = out.overlap_param_gather;
    ddp_config.align_param_gather = out.align_param_gather;
    ddp_config.bucket_size = out.bucket_size;
    ddp_config.use_distributed_optimizer = true;
  } else {
    const bool any_dp_field = user.bucket_size || user.overlap_grad_reduce ||
                              user.overlap_param_gather || user.align_param_gather ||
                              user.overlap_param_gather_with_optimizer_step;
    if (any_dp_field) {
      warn(out, str_cat("comm_overlap data-parallel settings (bucket_size, overlap_grad_reduce, "
                        "overlap_param_gather, align_param_gather, "
                        "overlap_param_gather_with_optimizer_step) are ignored: optimizer kind '",
                        to_string(optimizer_config.kind),
                        "' is not a distributed optimizer; set them in the ddp section instead"));
    }
    out.bucket_size = ddp_config.bucket_size;
    out.overlap_grad_reduce = ddp_config.overlap_grad_reduce;
    out.overlap_param_gather = ddp_config.overlap_param_gather;
    out.align_param_gather = ddp_config.align_param_gather;
    out.overlap_param_gather_with_optimizer_step =
        optimizer_config.overlap_param_gather_with_optimizer_step;
  }

  out.cuda_device_max_connections = recommended_cuda_device_max_connections(mp, dp);
  if (out.cuda_device_max_connections) {
    log::info("recommended CUDA_DEVICE_MAX_CONNECTIONS=", *out.cuda_device_max_connections, " (",
              to_string(mp.gpu_arch), ")");
  }

  // Write the resolution back so printing this config shows what was decided.
  tp_comm_overlap = out.tp_comm_overlap;
  tp_comm_overlap_cfg = out.tp_comm_overlap_cfg;
  tp_comm_bootstrap_backend = out.tp_comm_bootstrap_backend;
  overlap_p2p_comm = out.overlap_p2p_comm;
  batch_p2p_comm = out.batch_p2p_comm;
  if (out.data_parallel_overlap_applied) {
    overlap_grad_reduce = out.overlap_grad_reduce;
    overlap_param_gather = out.overlap_param_gather;
    overlap_param_gather_with_optimizer_step = out.overlap_param_gather_with_optimizer_step;
    align_param_gather = out.align_param_gather;
    bucket_size = out.bucket_size;
  } else {  // not used: keep what the user wrote
    overlap_grad_reduce = user.overlap_grad_reduce;
    overlap_param_gather = user.overlap_param_gather;
    overlap_param_gather_with_optimizer_step = user.overlap_param_gather_with_optimizer_step;
    align_param_gather = user.align_param_gather;
    bucket_size = user.bucket_size;
  }
  defer_embedding_wgrad_compute = out.defer_embedding_wgrad_compute;
  wgrad_deferral_limit = out.wgrad_deferral_limit;
  data_parallel_size = out.data_parallel_size;
  return out;
}

}  // namespace shardwise
