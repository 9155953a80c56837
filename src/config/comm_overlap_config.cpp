#include "shardwise/config/comm_overlap_config.hpp"

#include "shardwise/config/comm_overlap_presets.hpp"
#include "shardwise/config/comm_overlap_steps.hpp"
#include "shardwise/core/checked_size.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/core/logging.hpp"
#include "shardwise/core/message_text.hpp"

namespace shardwise {
namespace {

void warn(CommOverlapResolution& out, std::string message) {
  log::warning(message);
  out.warnings.push_back(std::move(message));
}

// TP rules (a user's request is honoured only where TP overlap can run) and the config choice.
void resolve_tensor_parallel(const ModelParallelConfig& mp, const CommOverlapSettings& user,
                             CommOverlapResolution& out) {
  bool tp_overlap = user.tp_comm_overlap.value_or(false);
  if (tp_overlap) {
    if (auto reason = tp_overlap_blocker(mp)) {
      warn(out, str_cat("disabling tp_comm_overlap: ", *reason));
      tp_overlap = false;
    }
  } else if (user.tp_comm_overlap_cfg) {
    warn(out, "comm_overlap.tp_comm_overlap_cfg is ignored because tp_comm_overlap is off");
  }
  out.tp_comm_overlap = tp_overlap;
  if (tp_overlap) {
    TpOverlapCfgChoice choice = choose_tp_overlap_cfg(mp, user.tp_comm_overlap_cfg);
    out.tp_comm_overlap_cfg = std::move(choice.cfg);
    out.tp_comm_overlap_cfg_source = std::move(choice.source);
    if (out.tp_comm_overlap_cfg_source.starts_with("preset:")) {
      log::info("tp_comm_overlap: using preset ", out.tp_comm_overlap_cfg_source.substr(7));
    } else if (!out.tp_comm_overlap_cfg) {
      warn(out,
           "tp_comm_overlap: no tp_comm_overlap_cfg given and no preset matches this run; the "
           "TP-overlap backend uses its default config");
    }
    if (out.tp_comm_overlap_cfg) {
      out.tp_comm_overlap_backend_cfg = to_backend_map(*out.tp_comm_overlap_cfg);
    }
    out.tp_comm_bootstrap_backend = user.tp_comm_bootstrap_backend.value_or("mpi");
  }
  out.defer_embedding_wgrad_compute = user.defer_embedding_wgrad_compute.value_or(false);
  out.wgrad_deferral_limit = user.wgrad_deferral_limit.value_or(-1);
}

void store(CommOverlapResolution& out, const DataParallelOverlap& dp) {
  out.bucket_size = dp.bucket_size;
  out.overlap_grad_reduce = dp.overlap_grad_reduce;
  out.overlap_param_gather = dp.overlap_param_gather;
  out.align_param_gather = dp.align_param_gather;
  out.overlap_param_gather_with_optimizer_step = dp.overlap_param_gather_with_optimizer_step;
}

// DP rules: only the distributed optimizer has the reduce-scatter / all-gather to overlap; the
// result is written into its configs. Otherwise they stay as they are and are only reported.
void resolve_data_parallel(const ModelParallelConfig& mp, const CommOverlapSettings& user,
                           OptimizerConfig& optimizer, DistributedDataParallelConfig& ddp,
                           CommOverlapResolution& out) {
  const bool interleaved = mp.pp > 1 && mp.vp > 1;
  if (optimizer.use_distributed_optimizer()) {
    const DataParallelOverlap resolved = prefer_user_values(
        data_parallel_overlap_defaults(out.data_parallel_size, interleaved), user);
    check_data_parallel_overlap(interleaved, resolved);
    out.data_parallel_overlap_applied = true;
    store(out, resolved);
    // comm_overlap's key keeps Megatron's rule (interleaved pipeline only) and wins when set;
    // unset, the optimizer section's own key stands: the distributed optimizers gather during
    // their step at any pipeline size.
    if (user.overlap_param_gather_with_optimizer_step) {
      optimizer.overlap_param_gather_with_optimizer_step =
          resolved.overlap_param_gather_with_optimizer_step;
    }
    ddp.overlap_grad_reduce = resolved.overlap_grad_reduce;
    ddp.overlap_param_gather = resolved.overlap_param_gather;
    ddp.align_param_gather = resolved.align_param_gather;
    ddp.bucket_size = resolved.bucket_size;
    ddp.use_distributed_optimizer = true;
    return;
  }
  const bool any_dp_field = user.bucket_size || user.overlap_grad_reduce ||
                            user.overlap_param_gather || user.align_param_gather ||
                            user.overlap_param_gather_with_optimizer_step;
  if (any_dp_field) {
    warn(out, str_cat("comm_overlap data-parallel settings (bucket_size, overlap_grad_reduce, "
                      "overlap_param_gather, align_param_gather, "
                      "overlap_param_gather_with_optimizer_step) are ignored: optimizer kind '",
                      to_string(optimizer.kind),
                      "' is not a distributed optimizer; set them in the ddp section instead"));
  }
  store(out, {ddp.bucket_size, ddp.overlap_grad_reduce, ddp.overlap_param_gather,
              ddp.align_param_gather, optimizer.overlap_param_gather_with_optimizer_step});
}

}  // namespace

// The MPI backend of the tp layer (src/tp) runs every overlap algorithm over the comm layer's
// point-to-point and collectives, which every build has (MPI is required).
bool tp_comm_overlap_backend_available() { return true; }

void validate(const CommOverlapSettings& config) {
  if (config.tp_comm_overlap_cfg) {
    validate(*config.tp_comm_overlap_cfg, "comm_overlap.tp_comm_overlap_cfg");
  }
  if (config.tp_comm_bootstrap_backend) {
    const std::string& backend = *config.tp_comm_bootstrap_backend;
    SW_REQUIRE(backend == "nccl" || backend == "mpi" || backend == "gloo", ConfigError,
               "comm_overlap.tp_comm_bootstrap_backend: unknown backend '", printable(backend),
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
    SW_REQUIRE(*config.data_parallel_size >= 1 && *config.data_parallel_size <= kMaxParallelSize,
               ConfigError, "comm_overlap.data_parallel_size must be in [1, ", kMaxParallelSize,
               "] (got ", *config.data_parallel_size, ")");
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
  resolve_tensor_parallel(mp, user, out);

  const PipelineOverlap pipeline = prefer_user_values(pipeline_overlap_defaults(mp), user);
  check_pipeline_overlap(mp, pipeline);
  out.overlap_p2p_comm = pipeline.overlap_p2p_comm;
  out.batch_p2p_comm = pipeline.batch_p2p_comm;

  resolve_data_parallel(mp, user, optimizer_config, ddp_config, out);

  out.cuda_device_max_connections =
      recommended_cuda_device_max_connections(mp, out.data_parallel_size);
  if (out.cuda_device_max_connections) {
    log::info("recommended CUDA_DEVICE_MAX_CONNECTIONS=", *out.cuda_device_max_connections, " (",
              to_string(mp.gpu_arch), ")");
  }

  // Write the resolution back so printing this config shows what was decided.
  static_cast<CommOverlapSettings&>(*this) = record_resolution(out, user);
  return out;
}

}  // namespace shardwise
