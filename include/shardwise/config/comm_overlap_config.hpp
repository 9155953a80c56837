// CommOverlapConfig: tensor-, pipeline- and data-parallel communication-overlap settings, resolved
// against the parallel layout the way Megatron-Bridge's CommOverlapConfig.setup() does.
// setup() runs the steps of comm_overlap_steps.hpp, one function per rule set below.
//
// Every field is optional: a set field is the user's explicit choice and always wins; an unset
// one takes the default derived by setup():
//   TP   tp_comm_overlap off unless asked. When asked but tp < 2, sequence parallelism is off, or
//        no TP-overlap backend is available, it is turned off with a warning saying why. When
//        on: the user's tp_comm_overlap_cfg, else the preset matching the run (see
//        comm_overlap_presets.hpp), else the backend's own default (warning); bootstrap backend
//        "mpi" (the MPI backend's; nccl and gloo are accepted and reported as not applicable).
//   PP   pp > 1 and vp > 1: overlap_p2p_comm on, batch_p2p_comm off; pp > 1 and vp = 1: the
//        reverse; pp = 1: both off.
//   DP   only with the distributed optimizer (kinds layer-wise and distributed): dp > 1 gives
//        bucket_size 128 Mi elements, overlap_grad_reduce and overlap_param_gather on, and
//        align_param_gather on when pp > 1 and vp > 1 (and overlap_param_gather is on); dp = 1
//        turns them off. Written into the
//        OptimizerConfig and the DistributedDataParallelConfig. Without the distributed optimizer
//        both are left untouched (and DP fields set here are ignored with a warning).
//   CUDA_DEVICE_MAX_CONNECTIONS recommendation: Hopper and older: 1 when tp > 1 or cp > 1 and
//        MoE all-to-all overlap is off; Blackwell: 32 when (tp > 1 or cp > 1) and (dp > 1 or
//        pp > 1); otherwise 8. None without a GPU.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "shardwise/config/ddp_config.hpp"
#include "shardwise/config/gpu_arch.hpp"
#include "shardwise/config/optimizer_config.hpp"
#include "shardwise/config/tp_overlap_config.hpp"

namespace shardwise {

// Whether this build has a TP-overlap backend: true, the MPI backend of the tp layer
// (include/shardwise/tp/overlapped_gemm.hpp), built in every configuration.
bool tp_comm_overlap_backend_available();

// The parallel layout and the facts about the run that the resolution depends on.
struct ModelParallelConfig {
  int tp = 1;
  int pp = 1;
  int vp = 1;  // virtual pipeline stages per rank (1 = not interleaved)
  int cp = 1;
  int ep = 1;
  bool sequence_parallel = false;
  // Data-parallel size; when unset it is world_size / (tp * pp * cp), or 1 without a world size.
  std::optional<int> data_parallel_size;
  std::optional<int> world_size;
  GpuArch gpu_arch = GpuArch::kNone;
  // MoE expert-parallel all-to-all overlap (Megatron's overlap_moe_expert_parallel_comm).
  bool moe_a2a_overlap = false;
  bool tp_overlap_backend_available = tp_comm_overlap_backend_available();
  // For picking a TP-overlap preset; 0 / empty = unknown, no preset is picked.
  int hidden_size = 0;
  int micro_batch_size = 0;
  int seq_length = 0;
  std::string precision;  // "bf16", "fp8", "fp32"
  bool lora = false;
};

// Everything setup() decided.
struct CommOverlapResolution {
  int data_parallel_size = 1;

  bool tp_comm_overlap = false;
  // The per-GEMM config handed to the backend; unset when TP overlap is off or the backend uses
  // its own default.
  std::optional<TransformerLayerTPOverlapCfg> tp_comm_overlap_cfg;
  TpOverlapBackendMap tp_comm_overlap_backend_cfg;  // flat "slot.field" -> scalar
  // "user", "preset:<name>", "backend-default", or "off".
  std::string tp_comm_overlap_cfg_source = "off";
  std::optional<std::string> tp_comm_bootstrap_backend;

  bool overlap_p2p_comm = false;
  bool batch_p2p_comm = false;
  bool defer_embedding_wgrad_compute = false;
  int wgrad_deferral_limit = -1;

  // True when the DP settings below were derived and written into the optimizer / DDP configs
  // (distributed optimizer); false when those configs were left untouched (the values below are
  // then copied from them).
  bool data_parallel_overlap_applied = false;
  bool overlap_grad_reduce = false;
  bool overlap_param_gather = false;
  bool overlap_param_gather_with_optimizer_step = false;
  bool align_param_gather = false;
  std::optional<std::int64_t> bucket_size;

  std::optional<int> cuda_device_max_connections;  // none without a GPU
  std::vector<std::string> warnings;               // also logged as they arise
};

// The user-facing fields (Megatron-Bridge's CommOverlapConfig dataclass); unset = derive.
struct CommOverlapSettings {
  std::optional<bool> tp_comm_overlap;
  std::optional<TransformerLayerTPOverlapCfg> tp_comm_overlap_cfg;
  std::optional<std::string> tp_comm_bootstrap_backend;  // nccl, mpi or gloo
  std::optional<bool> overlap_p2p_comm;
  std::optional<bool> batch_p2p_comm;
  std::optional<bool> overlap_grad_reduce;
  std::optional<bool> overlap_param_gather;
  std::optional<bool> overlap_param_gather_with_optimizer_step;
  std::optional<bool> align_param_gather;
  std::optional<std::int64_t> bucket_size;
  std::optional<bool> defer_embedding_wgrad_compute;
  std::optional<int> wgrad_deferral_limit;
  std::optional<int> data_parallel_size;

  bool operator==(const CommOverlapSettings&) const = default;
};

class CommOverlapConfig : public CommOverlapSettings {
 public:
  // Records the fields set so far as the user's explicit choices. Idempotent: the first snapshot
  // is kept, so values written back by setup() never count as user choices. setup() calls it.
  void finalize();
  bool finalized() const { return user_.has_value(); }
  // The snapshot taken by finalize() (the current fields before that).
  const CommOverlapSettings& user_choices() const { return user_ ? *user_ : *this; }

  // Resolves the settings (rules above), writes the DP results into optimizer_config and
  // ddp_config (distributed optimizer only) and the resolved values back into this object's
  // fields. Repeatable: every call starts from the finalize() snapshot. Throws ConfigError naming
  // the field for invalid combinations (tp/pp/vp/cp/ep < 1, vp > 1 with pp = 1, dp not dividing
  // the world, bucket_size < 1, num_splits < 1, method mismatch, unknown bootstrap backend,
  // overlap_p2p_comm together with batch_p2p_comm, ...).
  CommOverlapResolution setup(const ModelParallelConfig& model_parallel,
                              OptimizerConfig& optimizer_config,
                              DistributedDataParallelConfig& ddp_config);

  bool operator==(const CommOverlapConfig&) const = default;

 private:
  std::optional<CommOverlapSettings> user_;
};

// Checks the fields that can be checked without the parallel layout (ranges, names, TP cfg).
void validate(const CommOverlapSettings& config);

// Recommended CUDA_DEVICE_MAX_CONNECTIONS (rule above); nullopt for GpuArch::kNone.
std::optional<int> recommended_cuda_device_max_connections(
    const ModelParallelConfig& model_parallel, int data_parallel_size);

}  // namespace shardwise
