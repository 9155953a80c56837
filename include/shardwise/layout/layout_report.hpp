// Rendering of a computed layout for people and tools: JSON (machine-readable, stable keys), a
// text table, and an SVG picture of each buffer as buckets x shards with one box per param.
#pragma once

#include <string>

#include "shardwise/layout/layout_options.hpp"
#include "shardwise/layout/layout_stats.hpp"
#include "shardwise/layout/param_info.hpp"
#include "shardwise/layout/param_layout.hpp"
#include "shardwise/layout/shard_group_choice.hpp"

namespace shardwise {

// Everything a report shows. The pointers must outlive the render call.
struct LayoutReportInput {
  std::string model_name;
  const ParamList* params = nullptr;
  const FullParamLayout* layout = nullptr;
  const LayoutOptions* options = nullptr;
  const LayoutStats* stats = nullptr;
  // Set when the shard group size was chosen by `auto`: the table it chose from is shown.
  const ShardGroupChoice* shard_group_choice = nullptr;
};

// {"model", "optimizer", "dp", "expert_dp", "shard_group_size", "bucket_size",
//  "buffers": [{"param_dtype", "grad_dtype", "expert_parallel", "layer_wise", "num_shards",
//               "numel", "numel_unpadded", "cost": COST,
//               "buckets": [{"start", "end", "numel_unpadded"}],
//               "params": [{"name", "start", "end", "bucket", "shard", "index", "param_id"}]}],
//  "ranks": [{"rank", "numel", "ns_cost"}],
//  "totals": {"numel_unpadded", "numel_padded", "padding_fraction", "ns_cost_max_over_mean",
//             "cost": COST},
//  "shard_group_choice" (only with auto): {"chosen", "candidates": [{"shard_group_size",
//             "padding_fraction", "param_grad_bytes", "optimizer_state_bytes", "comm_bytes"}]}}
// COST (per rank, see layout_cost.hpp): {"replicas", "padding_numel", "param_bytes",
//   "grad_bytes", "optimizer_state_bytes", "memory_bytes", "comm_bytes", "exposed_rs_bytes"}.
// "shard" is the owning shard for shard-aligned buffers and null for element-sharded ones;
// "index" is the param's index among same-dtype params (PerBufferParamLayout::param_indices) and
// "param_id" its position in the model (forward order). Params are listed in buffer order.
std::string render_layout_json(const LayoutReportInput& input);

struct TextReportOptions {
  // Longer bucket / rank tables show the first and last few rows plus a min/max/mean summary.
  int max_bucket_rows = 24;
  int max_rank_rows = 16;
};
std::string render_layout_text(const LayoutReportInput& input, const TextReportOptions& = {});

// Standalone SVG document: per buffer, one row per bucket and one column per shard; each param is
// a box placed at its offset within its shard (labelled when large enough, with a <title> tooltip
// holding its name and range); grey is padding.
std::string render_layout_svg(const LayoutReportInput& input);

// Short name of an optimizer algorithm as the CLI spells it: none, distributed, layer-wise.
const char* layout_algorithm_name(LayoutAlgorithm algorithm);

}  // namespace shardwise
