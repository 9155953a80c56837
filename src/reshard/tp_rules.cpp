#include "shardwise/reshard/tp_rules.hpp"

#include <string_view>

#include "shardwise/core/error.hpp"

namespace shardwise {
namespace {

bool is_split(const TpRule& rule) { return rule.kind != TpKind::kReplicated; }

// The module a param belongs to, its name's component before ".weight" / ".bias" without
// Megatron-Core's "linear_" prefix ("fc1" in "decoder.layers.0.mlp.linear_fc1.weight"); empty
// for another leaf. A whole component, not a suffix: Hugging Face's "q_proj" or "up_proj" ended
// in "proj" and were split as the row-parallel attention projection.
std::string_view module_of(std::string_view name, bool& weight) {
  weight = name.ends_with(".weight");
  if (!weight && !name.ends_with(".bias")) return {};
  name.remove_suffix(weight ? 7 : 5);
  const std::size_t dot = name.rfind('.');
  std::string_view module = dot == std::string_view::npos ? name : name.substr(dot + 1);
  if (module.starts_with("linear_")) module.remove_prefix(7);
  return module;
}

}  // namespace

const char* tp_kind_name(TpKind kind) {
  switch (kind) {
    case TpKind::kColumnParallel:
      return "column";
    case TpKind::kRowParallel:
      return "row";
    case TpKind::kReplicated:
      return "replicated";
  }
  return "?";
}

std::string to_string(const TpRule& rule) {
  if (!is_split(rule)) return "replicated";
  std::string out = str_cat(tp_kind_name(rule.kind), "(dim ", rule.partition_dim);
  if (rule.stride != 1) out += str_cat(", stride ", rule.stride);
  return out + ")";
}

TpRule megatron_tp_rule(const std::string& name, const std::vector<std::int64_t>& shape) {
  bool weight = false;
  const std::string_view module = module_of(name, weight);
  TpRule rule;
  if (module == "qkv") {
    rule = {TpKind::kColumnParallel, 0, 3};
  } else if (module == "fc1" ||
             (weight && (module == "word_embeddings" || module == "output_layer"))) {
    rule = {TpKind::kColumnParallel, 0, 1};
  } else if (weight && (module == "proj" || module == "fc2")) {
    rule = {TpKind::kRowParallel, 1, 1};
  } else {
    return rule;
  }
  const std::size_t want = weight ? 2 : 1;
  SW_REQUIRE(shape.size() == want, InvalidArgument, "param ", name, ": a ", tp_kind_name(rule.kind),
             "-parallel ", weight ? "weight" : "bias", " must be ", want, "-d, got shape ",
             to_string(shape));
  return rule;
}

TpRule tp_rule_from_split(const std::string& name, int dim, int stride) {
  SW_REQUIRE(dim >= -1 && dim <= 1 && stride >= 1, InvalidArgument, "param ", name,
             ": a tensor-parallel split along dim ", dim, " with stride ", stride,
             " is not a Megatron split (dim -1, 0 or 1, stride >= 1)");
  if (dim < 0) return TpRule{};
  return {dim == 0 ? TpKind::kColumnParallel : TpKind::kRowParallel, dim, stride};
}

bool is_mxfp8_refit_candidate(const std::string& name, const std::vector<std::int64_t>& shape) {
  if (shape.size() != 2) return false;
  return name.find("embedding") == std::string::npos &&
         name.find("output_layer") == std::string::npos;
}

ShardingSpec tp_sharding(const std::string& name, const std::vector<std::int64_t>& shape,
                         const TpRule& rule, int tp, int first_rank) {
  ParallelSharding placement;
  placement.first_rank = first_rank;
  if (is_split(rule)) {
    placement.tp = tp;
    placement.partition_dim = rule.partition_dim;
    placement.stride = rule.stride;
  } else {
    placement.dp = tp;
  }
  return parallel_sharding(name, shape, placement);
}

std::vector<std::int64_t> tp_local_shape(const std::vector<std::int64_t>& shape, const TpRule& rule,
                                         int tp) {
  SW_REQUIRE(tp >= 1, InvalidArgument, "tensor-parallel size ", tp, " must be >= 1");
  std::vector<std::int64_t> local = shape;
  if (!is_split(rule)) return local;
  SW_REQUIRE(rule.partition_dim >= 0 && rule.partition_dim < static_cast<int>(shape.size()),
             InvalidArgument, "split dim ", rule.partition_dim, " outside shape ",
             to_string(shape));
  const std::int64_t d = shape[static_cast<std::size_t>(rule.partition_dim)];
  SW_REQUIRE(d % (static_cast<std::int64_t>(tp) * rule.stride) == 0, InvalidArgument, "dim ",
             rule.partition_dim, " of ", to_string(shape), " is not divisible by tp ", tp,
             rule.stride != 1 ? str_cat(" x stride ", rule.stride) : std::string());
  local[static_cast<std::size_t>(rule.partition_dim)] = d / tp;
  return local;
}

}  // namespace shardwise
