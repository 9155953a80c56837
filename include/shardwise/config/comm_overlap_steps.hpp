// The steps of CommOverlapConfig::setup(), one function per rule set, in the order setup() runs
// them (Megatron-Bridge keeps the same steps as separate helpers of its CommOverlapConfig):
//   1. layout checks, data-parallel size   resolve_data_parallel_size
//   2. TP rules                            tp_overlap_blocker
//   3. TP-overlap preset resolution        choose_tp_overlap_cfg
//   4. PP rules                            pipeline_overlap_defaults, check_pipeline_overlap
//   5. DP rules (distributed optimizer)    data_parallel_overlap_defaults,
//                                          check_data_parallel_overlap
//   6. user-value precedence               prefer_user_values, record_resolution
// Each step is a pure function of its inputs, so each rule can be tested on its own.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "shardwise/config/comm_overlap_config.hpp"

namespace shardwise {

// Step 1. Checks tp/pp/vp/cp/ep >= 1, vp > 1 only with pp > 1, that the world splits into
// tp * pp * cp model-parallel groups, that user_dp agrees with the run, and that ep divides
// dp * cp. Returns the data-parallel size: user_dp or the run's, else world / (tp * pp * cp),
// else 1. ConfigError naming the field otherwise.
int resolve_data_parallel_size(const ModelParallelConfig& model_parallel,
                               std::optional<int> user_data_parallel_size);

// Step 2. Why TP overlap cannot run on this layout (tp < 2, sequence parallelism off, no
// backend); nullopt when it can. TP overlap is never on by default: this only decides whether a
// user's request is honoured.
std::optional<std::string> tp_overlap_blocker(const ModelParallelConfig& model_parallel);

// Step 3. The per-GEMM config handed to the TP-overlap backend: the user's, else the preset
// matching the run, else none (the backend uses its own default).
struct TpOverlapCfgChoice {
  std::optional<TransformerLayerTPOverlapCfg> cfg;
  std::string source;  // "user", "preset:<name>" or "backend-default"
};
TpOverlapCfgChoice choose_tp_overlap_cfg(
    const ModelParallelConfig& model_parallel,
    const std::optional<TransformerLayerTPOverlapCfg>& user_cfg);

// Step 4. Pipeline point-to-point overlap. Defaults: the interleaved schedule (pp > 1, vp > 1)
// overlaps p2p, the plain one (pp > 1, vp = 1) batches it, pp = 1 does neither.
struct PipelineOverlap {
  bool overlap_p2p_comm = false;
  bool batch_p2p_comm = false;
  bool operator==(const PipelineOverlap&) const = default;
};
PipelineOverlap pipeline_overlap_defaults(const ModelParallelConfig& model_parallel);
// With pp > 1: not both on, and overlap_p2p_comm only on the interleaved schedule.
void check_pipeline_overlap(const ModelParallelConfig& model_parallel,
                            const PipelineOverlap& resolved);

// Step 5. Data-parallel overlap of the distributed optimizer's reduce-scatter / all-gather.
// Defaults: dp > 1 gives 128 Mi-element buckets with both overlaps on; dp = 1 none of it.
// align_param_gather is wanted on the interleaved schedule but only takes effect together with
// overlap_param_gather (prefer_user_values applies that).
struct DataParallelOverlap {
  std::optional<std::int64_t> bucket_size;
  bool overlap_grad_reduce = false;
  bool overlap_param_gather = false;
  bool align_param_gather = false;
  bool overlap_param_gather_with_optimizer_step = false;
  bool operator==(const DataParallelOverlap&) const = default;
};
inline constexpr std::int64_t kOverlapBucketSize = 128LL * 1024 * 1024;  // elements
DataParallelOverlap data_parallel_overlap_defaults(int data_parallel_size, bool interleaved);
// align_param_gather and overlap_param_gather_with_optimizer_step need overlap_param_gather; the
// latter also needs the interleaved schedule.
void check_data_parallel_overlap(bool interleaved, const DataParallelOverlap& resolved);

// Step 6. Every field the user set wins over the rule's default.
PipelineOverlap prefer_user_values(const PipelineOverlap& defaults,
                                   const CommOverlapSettings& user);
DataParallelOverlap prefer_user_values(const DataParallelOverlap& defaults,
                                       const CommOverlapSettings& user);
// The settings a CommOverlapConfig shows after setup(): what setup() decided, except the DP
// fields when the DP overlap was not applied (then the user's own values stay, unset or not).
CommOverlapSettings record_resolution(const CommOverlapResolution& resolved,
                                      const CommOverlapSettings& user);

}  // namespace shardwise
