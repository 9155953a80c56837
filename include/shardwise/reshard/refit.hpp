// Refit (Megatron-Core's resharding): moving freshly trained weights from the training ranks, where
// every data-parallel rank holds each parameter whole, to an inference group that wants Megatron
// tensor-parallel slices - bf16, or MXFP8 in persistent buffers whose addresses never change, so
// CUDA-graph captures on the inference side stay valid from one refit to the next.
//
// The weights arrive in Megatron's tensor-parallel layout (tp_rules.hpp); the 2-D non-embedding
// weights as MXFP8 in the MXFP8 modes.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "shardwise/comm/process_group.hpp"
#include "shardwise/core/mxfp8.hpp"
#include "shardwise/reshard/mxfp8_reshard_transform.hpp"
#include "shardwise/reshard/reshard_executor.hpp"
#include "shardwise/reshard/reshard_plan.hpp"
#include "shardwise/reshard/sharding_spec.hpp"
#include "shardwise/reshard/tp_rules.hpp"

namespace shardwise {

// Refit between a training group and an inference group sharing one process group.

enum class RefitMode {
  kBf16,                // every param as plain bf16
  kMxfp8ReceiverSide,   // bf16 on the wire, MXFP8 conversion on the inference ranks
  kMxfp8ConvertOnSend,  // the training ranks quantize; MXFP8 data + scales on the wire
};
// "bf16", "mxfp8-receiver", "mxfp8-send"
const char* refit_mode_name(RefitMode mode);

struct RefitParam {
  std::string name;
  std::vector<std::int64_t> shape;
  // The model's own tensor-parallel split of the param; unset (weights from a file): the
  // Megatron name rules (megatron_tp_rule).
  std::optional<TpRule> tp_rule = std::nullopt;
  bool operator==(const RefitParam&) const = default;
};

// p.tp_rule when the model declared it, else the Megatron rule for its name.
TpRule refit_tp_rule(const RefitParam& p);

// Ranks of the refit group: [0, num_train_ranks) train, each holding every param whole (data-
// parallel replicas, so the planner spreads the sends over them); [num_train_ranks,
// num_train_ranks + tp) the inference TP group. Ranks beyond that take no part in the transfer.
struct RefitTopology {
  int num_train_ranks = 1;
  int tp = 1;
  int first_inference_rank() const { return num_train_ranks; }
  int num_ranks() const { return num_train_ranks + tp; }
};

// The reshard requests of a refit (bf16 on the wire): DP replicas -> Megatron TP.
std::vector<ParamReshardRequest> make_refit_requests(const std::vector<RefitParam>& params,
                                                     const RefitTopology& topology);

// One inference rank's copy of one param: its local TP tensor in one contiguous allocation, bf16
// or MXFP8 (data row-major [rows, cols], scales row-major [rows, ceil(cols / 32)]).
struct InferenceTensor {
  std::string name;
  std::vector<std::int64_t> global_shape;
  std::vector<std::int64_t> local_shape;
  TpRule rule;
  bool mxfp8 = false;
  std::vector<std::uint16_t> bf16;  // when !mxfp8
  Mxfp8Tensor quantized;            // when mxfp8
};

struct RefitStats {
  ReshardStats local;           // this rank's executor counters
  std::int64_t wire_bytes = 0;  // bytes sent over the wire, summed over the group
  std::int64_t elements = 0;    // param elements delivered to the inference ranks, summed
  double seconds = 0;           // the transfer (execute_reshard), slowest rank
  double stage_seconds = 0;     // training ranks' conversion of their values to bf16, slowest
  double gigabytes_per_second() const { return seconds > 0 ? wire_bytes / seconds / 1e9 : 0; }
};

// Runs refits of a fixed set of params in one mode. Allocates the inference ranks' persistent
// buffers once, in the constructor; every refit writes into the same memory.
class RefitEngine {
 public:
  // Collective-free. `group` must have at least topology.num_ranks() ranks. `quantizer` runs the
  // MXFP8 modes' quantization (the CPU codec, or cuda::DeviceMxfp8Quantizer for the GPU).
  RefitEngine(ProcessGroupPtr group, std::vector<RefitParam> params, RefitTopology topology,
              RefitMode mode, Mxfp8Options mxfp8_options = {},
              Mxfp8QuantizerPtr quantizer = host_mxfp8_quantizer());

  bool is_train_rank() const;
  bool is_inference_rank() const;
  int tp_rank() const;  // -1 off the inference group
  RefitMode mode() const { return mode_; }
  const RefitTopology& topology() const { return topology_; }
  const std::vector<RefitParam>& params() const { return params_; }

  // Collective over the group. Training ranks pass every param's whole value (fp32 or bf16,
  // row-major, by name); everyone else passes {}. Throws InvalidArgument naming a missing or
  // mis-sized param.
  RefitStats refit(const std::map<std::string, TensorView>& full_values);

  // This rank's persistent tensors (empty off the inference group), in name order.
  const std::vector<InferenceTensor>& weights() const { return weights_; }
  // Start address of every persistent buffer (bf16 data, or MXFP8 data and scale), in order.
  std::vector<const void*> buffer_addresses() const;
  // Overwrites the persistent buffers' contents with `byte` (addresses unchanged), so a refit
  // that fails to deliver something cannot pass verification with stale data.
  void fill_buffers(std::uint8_t byte);

 private:
  ProcessGroupPtr group_;
  std::vector<RefitParam> params_;
  RefitTopology topology_;
  RefitMode mode_;
  Mxfp8Options mxfp8_options_;
  ReshardPlan plan_;
  std::vector<InferenceTensor> weights_;
  ReshardDestinations destinations_;                  // views into weights_ (bf16 params)
  Mxfp8PersistentBuffers mxfp8_buffers_;              // views into weights_ (MXFP8 params)
  std::unique_ptr<Mxfp8ReshardTransform> transform_;  // null in bf16 mode
  ReshardWorkspace workspace_;                        // staging buffers, kept across refits
  std::vector<std::vector<std::uint16_t>> staging_;   // training ranks: bf16 copy of each param
};

}  // namespace shardwise
