#include "shardwise/config/comm_overlap_steps.hpp"

#include "shardwise/config/comm_overlap_presets.hpp"
#include "shardwise/core/checked_size.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/core/logging.hpp"

namespace shardwise {
namespace {

void require_at_least_one(int value, const char* field) {
  SW_REQUIRE(value >= 1, ConfigError, field, " must be >= 1 (got ", value, ")");
}

void check_parallel_sizes(const ModelParallelConfig& mp) {
  require_at_least_one(mp.tp, "parallel.tp");
  require_at_least_one(mp.pp, "parallel.pp");
  require_at_least_one(mp.vp, "parallel.vp");
  require_at_least_one(mp.cp, "parallel.cp");
  require_at_least_one(mp.ep, "parallel.ep");
  SW_REQUIRE(mp.vp == 1 || mp.pp > 1, ConfigError, "parallel.vp = ", mp.vp,
             " needs pipeline parallelism (parallel.pp > 1)");
}

// The data-parallel size the world implies; dp (when known) must match it.
int data_parallel_size_of_world(const ModelParallelConfig& mp, int world, std::optional<int> dp) {
  require_at_least_one(world, "world_size");
  const std::int64_t model_parallel = checked_product<ConfigError>(
      {{"parallel.tp", mp.tp}, {"parallel.pp", mp.pp}, {"parallel.cp", mp.cp}}, kMaxParallelSize,
      "model-parallel size");
  SW_REQUIRE(world % model_parallel == 0, ConfigError, "world_size ", world,
             " is not divisible by tp * pp * cp = ", model_parallel, " (parallel.tp = ", mp.tp,
             ", parallel.pp = ", mp.pp, ", parallel.cp = ", mp.cp, ")");
  if (dp) {
    SW_REQUIRE(world % *dp == 0, ConfigError, "comm_overlap.data_parallel_size ", *dp,
               " does not divide world_size ", world);
    SW_REQUIRE(*dp == world / model_parallel, ConfigError, "comm_overlap.data_parallel_size ", *dp,
               " != world_size / (tp * pp * cp) = ", world / model_parallel);
  }
  return static_cast<int>(world / model_parallel);
}

}  // namespace

int resolve_data_parallel_size(const ModelParallelConfig& mp, std::optional<int> user_dp) {
  check_parallel_sizes(mp);
  if (user_dp && mp.data_parallel_size) {
    SW_REQUIRE(*user_dp == *mp.data_parallel_size, ConfigError, "comm_overlap.data_parallel_size (",
               *user_dp, ") disagrees with the data-parallel size of the run (",
               *mp.data_parallel_size, ")");
  }
  std::optional<int> dp = user_dp ? user_dp : mp.data_parallel_size;
  if (dp) require_at_least_one(*dp, "comm_overlap.data_parallel_size");
  if (mp.world_size) dp = data_parallel_size_of_world(mp, *mp.world_size, dp);
  const int data_parallel = dp.value_or(1);
  const std::int64_t dp_cp =
      checked_product<ConfigError>({{"data-parallel size", data_parallel}, {"parallel.cp", mp.cp}});
  SW_REQUIRE(dp_cp % mp.ep == 0, ConfigError, "parallel.ep = ", mp.ep,
             " must divide dp * cp = ", dp_cp);
  return data_parallel;
}

std::optional<std::string> tp_overlap_blocker(const ModelParallelConfig& mp) {
  if (mp.tp < 2) return str_cat("tensor parallel size is ", mp.tp, " (needs tp >= 2)");
  if (!mp.sequence_parallel) {
    return "sequence parallelism is off (TP overlap needs sequence_parallel = true)";
  }
  if (!mp.tp_overlap_backend_available) {
    return "no TP-overlap backend is available (shardwise has no userbuffers implementation; "
           "Transformer Engine provides one)";
  }
  return std::nullopt;
}

TpOverlapCfgChoice choose_tp_overlap_cfg(
    const ModelParallelConfig& mp, const std::optional<TransformerLayerTPOverlapCfg>& user_cfg) {
  if (user_cfg) return {user_cfg, "user"};
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
    return {comm_overlap_preset(*name), str_cat("preset:", *name)};
  }
  return {std::nullopt, "backend-default"};
}

PipelineOverlap pipeline_overlap_defaults(const ModelParallelConfig& mp) {
  const bool interleaved = mp.pp > 1 && mp.vp > 1;
  return {.overlap_p2p_comm = interleaved, .batch_p2p_comm = mp.pp > 1 && !interleaved};
}

void check_pipeline_overlap(const ModelParallelConfig& mp, const PipelineOverlap& resolved) {
  if (mp.pp == 1) return;  // no pipeline: the flags have nothing to act on
  SW_REQUIRE(!(resolved.overlap_p2p_comm && resolved.batch_p2p_comm), ConfigError,
             "comm_overlap.overlap_p2p_comm and comm_overlap.batch_p2p_comm cannot both be on");
  SW_REQUIRE(!resolved.overlap_p2p_comm || mp.vp > 1, ConfigError,
             "comm_overlap.overlap_p2p_comm needs the interleaved pipeline schedule (vp > 1)");
}

DataParallelOverlap data_parallel_overlap_defaults(int data_parallel_size, bool interleaved) {
  const bool multi = data_parallel_size > 1;
  DataParallelOverlap defaults;
  defaults.bucket_size = multi ? std::optional(kOverlapBucketSize) : std::nullopt;
  defaults.overlap_grad_reduce = multi;
  defaults.overlap_param_gather = multi;
  defaults.align_param_gather = interleaved;
  return defaults;
}

void check_data_parallel_overlap(bool interleaved, const DataParallelOverlap& resolved) {
  SW_REQUIRE(!resolved.align_param_gather || resolved.overlap_param_gather, ConfigError,
             "comm_overlap.align_param_gather needs overlap_param_gather");
  if (!resolved.overlap_param_gather_with_optimizer_step) return;
  SW_REQUIRE(resolved.overlap_param_gather, ConfigError,
             "comm_overlap.overlap_param_gather_with_optimizer_step needs overlap_param_gather");
  SW_REQUIRE(interleaved, ConfigError,
             "comm_overlap.overlap_param_gather_with_optimizer_step needs the interleaved "
             "pipeline schedule (pp > 1 and vp > 1)");
}

PipelineOverlap prefer_user_values(const PipelineOverlap& defaults,
                                   const CommOverlapSettings& user) {
  return {.overlap_p2p_comm = user.overlap_p2p_comm.value_or(defaults.overlap_p2p_comm),
          .batch_p2p_comm = user.batch_p2p_comm.value_or(defaults.batch_p2p_comm)};
}

DataParallelOverlap prefer_user_values(const DataParallelOverlap& defaults,
                                       const CommOverlapSettings& user) {
  DataParallelOverlap out;
  out.bucket_size = user.bucket_size ? user.bucket_size : defaults.bucket_size;
  out.overlap_grad_reduce = user.overlap_grad_reduce.value_or(defaults.overlap_grad_reduce);
  out.overlap_param_gather = user.overlap_param_gather.value_or(defaults.overlap_param_gather);
  // Aligning the gathers only means something when they overlap.
  out.align_param_gather =
      user.align_param_gather.value_or(defaults.align_param_gather && out.overlap_param_gather);
  out.overlap_param_gather_with_optimizer_step =
      user.overlap_param_gather_with_optimizer_step.value_or(
          defaults.overlap_param_gather_with_optimizer_step);
  return out;
}

CommOverlapSettings record_resolution(const CommOverlapResolution& out,
                                      const CommOverlapSettings& user) {
  CommOverlapSettings shown = user;
  shown.tp_comm_overlap = out.tp_comm_overlap;
  shown.tp_comm_overlap_cfg = out.tp_comm_overlap_cfg;
  shown.tp_comm_bootstrap_backend = out.tp_comm_bootstrap_backend;
  shown.overlap_p2p_comm = out.overlap_p2p_comm;
  shown.batch_p2p_comm = out.batch_p2p_comm;
  if (out.data_parallel_overlap_applied) {
    shown.overlap_grad_reduce = out.overlap_grad_reduce;
    shown.overlap_param_gather = out.overlap_param_gather;
    shown.overlap_param_gather_with_optimizer_step = out.overlap_param_gather_with_optimizer_step;
    shown.align_param_gather = out.align_param_gather;
    shown.bucket_size = out.bucket_size;
  }
  shown.defer_embedding_wgrad_compute = out.defer_embedding_wgrad_compute;
  shown.wgrad_deferral_limit = out.wgrad_deferral_limit;
  shown.data_parallel_size = out.data_parallel_size;
  return shown;
}

}  // namespace shardwise
