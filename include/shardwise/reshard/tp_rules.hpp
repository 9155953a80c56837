// Megatron tensor-parallel rules per weight kind: how the inference side splits each param over
// its TP ranks. Used by the online refit (refit.hpp) and the offline export (tp_export.hpp).
//
// The reference GPT declares its own splits (ParamInfo::tp_split, converted by
// tp_rule_from_split), and refit from a training run uses those; the name rules below are for
// weights read from a file. A test (tests/reshard/model_tp_split_test.cpp) keeps the two equal on
// every parameter of the GPT. Rules are matched on the param's module, the name's component
// before ".weight" / ".bias" with a "linear_" prefix dropped, so both this repository's names and
// Megatron-Core's linear_* names work, and other names (Hugging Face's q_proj, up_proj, ...) are
// replicated rather than split by a rule meant for another module:
//   column-parallel, split along dim 0 (the output features):
//     attention QKV weight and bias (*qkv.weight / *qkv.bias) with stride 3: the fused [q; k; v]
//       rows are split block-wise so each TP rank gets the q, k and v rows of its own heads;
//     MLP fc1 weight and bias (*fc1.weight / *fc1.bias);
//     word embeddings and the output layer, along the vocabulary (*word_embeddings.weight,
//       *output_layer.weight);
//   row-parallel, split along dim 1 (the input features): attention proj and MLP fc2 weights
//     (*proj.weight, *fc2.weight);
//   replicated on every TP rank: everything else (proj / fc2 biases, layernorms, position
//     embeddings).
// MXFP8 on the inference side: the 2-D weights except embeddings and the output layer (their rows
// are looked up, not multiplied, and stay bf16).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "shardwise/reshard/sharding_spec.hpp"

namespace shardwise {

enum class TpKind { kColumnParallel, kRowParallel, kReplicated };
// "column", "row", "replicated"
const char* tp_kind_name(TpKind kind);

struct TpRule {
  TpKind kind = TpKind::kReplicated;
  int partition_dim = 0;  // the split dimension (column: 0, row: 1); unused when replicated
  int stride = 1;         // block interleave of the split dim (fused QKV: 3)
  bool operator==(const TpRule&) const = default;
};

// "column(dim 0, stride 3)", "row(dim 1)", "replicated"
std::string to_string(const TpRule& rule);

// The Megatron rule for a param (see the header comment). Throws InvalidArgument naming the param
// when its shape cannot carry the rule (e.g. a 1-D "proj.weight").
TpRule megatron_tp_rule(const std::string& name, const std::vector<std::int64_t>& shape);

// The rule of a split declared by the model itself: split dimension `dim` (-1: replicated; 0:
// column-parallel, 1: row-parallel) in `stride` interleaved parts. Throws InvalidArgument naming
// the param for any other dimension or a stride below 1.
TpRule tp_rule_from_split(const std::string& name, int dim, int stride);

// Whether the inference side stores this param as MXFP8: 2-D and not an embedding / output layer.
bool is_mxfp8_refit_candidate(const std::string& name, const std::vector<std::int64_t>& shape);

// The spec of `rule` over the TP ranks [first_rank, first_rank + tp): split params give TP rank t
// its slice (stride blocks in order), replicated params are held whole by every TP rank. Throws
// InvalidArgument naming the param when tp x stride does not divide the split dimension.
ShardingSpec tp_sharding(const std::string& name, const std::vector<std::int64_t>& shape,
                         const TpRule& rule, int tp, int first_rank = 0);

// The shape of one TP rank's local tensor (the split dimension divided by tp).
std::vector<std::int64_t> tp_local_shape(const std::vector<std::int64_t>& shape, const TpRule& rule,
                                         int tp);

}  // namespace shardwise
