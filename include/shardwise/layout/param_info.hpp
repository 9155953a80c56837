// ParamInfo: everything the layout, DDP and optimizer layers need to know about one parameter.
// A model is an ordered list of them in forward order; backprop order is the reverse.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "shardwise/core/dtype.hpp"

namespace shardwise {

struct ParamInfo {
  std::string name;
  std::vector<std::int64_t> shape;
  DType dtype = DType::kBFloat16;
  // Gradient dtype when set explicitly; otherwise fp32 with grad_reduce_in_fp32, else dtype.
  std::optional<DType> grad_dtype;
  // Tied input embedding / output head: isolated in its own bucket (Megatron's shared_embedding).
  bool shared_embedding = false;
  // Expert (MoE) weights: live in separate buffers reduced over the expert-data-parallel group.
  bool expert_parallel = false;
  // Embedding or output-layer weight: never orthogonalised by Muon.
  bool embedding_or_output = false;
  // Explicit Muon opt-out/in; unset means "decide by shape" (2-D, not embedding/output).
  std::optional<bool> use_muon;
  // Fused QKV weight: row counts of the query, key and value parts (sum == shape[0]); empty when
  // the weight is not a fused QKV.
  std::vector<std::int64_t> qkv_split;
  // Tensor parallelism: the dimension this parameter is split along across the TP ranks (-1:
  // every TP rank holds the whole parameter). With tp_stride s > 1 the full dimension is s equal
  // parts (a fused QKV's query, key and value) and each rank holds its chunk of every part.
  int tp_partition_dim = -1;
  int tp_stride = 1;
  // How the model splits this parameter under tensor parallelism, declared at every TP size (tp = 1
  // included), so that refit and export take the model's own split instead of guessing it from
  // the name: dim -1 = replicated. Unset for parameters of a model that declares nothing.
  struct TpSplitDeclaration {
    int dim = -1;
    int stride = 1;
    bool operator==(const TpSplitDeclaration&) const = default;
  };
  std::optional<TpSplitDeclaration> tp_split = std::nullopt;
  // Held whole by every TP rank of a group of more than one (replicated, not partitioned): a
  // gradient norm over the TP group counts it once (Megatron's tensor_model_parallel=False).
  bool tp_duplicate = false;

  std::int64_t numel() const;
  bool is_2d() const { return shape.size() == 2; }
  bool is_qkv() const { return !qkv_split.empty(); }
  bool is_tp_partitioned() const { return tp_partition_dim >= 0; }
};

using ParamList = std::vector<ParamInfo>;

// Index of a parameter in its model's ParamList (forward order). Layouts refer to params by id,
// so they stay plain data with no pointers.
using ParamId = std::size_t;

// Whether the layer-wise optimizer (Muon on whole matrices) manages this parameter: use_muon is
// not false, it is 2-D, and it is not an embedding/output (or shared embedding) parameter.
bool is_managed_by_layer_wise_optimizer(const ParamInfo& param);

// Newton–Schulz work for one Muon step on this parameter: max(m,n)*min(m,n)^2 for a managed 2-D
// weight (per QKV part when split), numel otherwise (an elementwise AdamW update).
double newton_schulz_cost(const ParamInfo& param);

// What is wrong with `param.qkv_split` as a split of its rows ("must have 3 entries ...": three
// positive entries summing to shape[0] of a 2-D param), or nullopt when it is fine or empty.
std::optional<std::string> qkv_split_problem(const ParamInfo& param);

// "param 'NAME' (id N)" for error messages; "param id N" when id is outside params.
std::string param_label(const ParamList& params, ParamId id);

}  // namespace shardwise
