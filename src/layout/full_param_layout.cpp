// Routing of params to buffers and of buffers to layout algorithms.
#include "shardwise/layout/buffer_grouping.hpp"
#include "shardwise/layout/layout_algorithms.hpp"
#include "shardwise/layout/param_sizes.hpp"

namespace shardwise {

FullParamLayout compute_full_param_layout(const ParamList& params, const LayoutOptions& options) {
  options.validate();
  validate_param_sizes(params);
  FullParamLayout full;
  for (auto& [key, group] : group_params_for_buffers(params, options)) {
    BufferLayoutInput input;
    input.params = &params;
    input.buffer_params = std::move(group.params);
    input.param_indices = std::move(group.param_indices);
    input.bucket_size = options.bucket_size;
    const int group_dp = key.is_expert_parallel ? options.expert_dp() : options.data_parallel_size;
    // Layer-wise buffers are laid out for their shard group (S shards), the rest for all of dp.
    input.data_parallel_size = options.num_shards_for(
        options.algorithm == LayoutAlgorithm::kLayerWise && key.is_layer_wise, group_dp);
    input.pad_for_high_nccl_busbw = options.pad_buckets_for_high_nccl_busbw;
    input.overlap_aware_cuts = options.overlap_aware_cuts;
    PerBufferParamLayout layout;
    if (options.algorithm == LayoutAlgorithm::kDefault) {
      layout = compute_default_layout(input);
    } else if (key.is_layer_wise) {
      layout = compute_layer_wise_layout(input);
    } else {
      layout = compute_dist_opt_layout(input);
    }
    // Layouts are too important to trust unchecked: every invariant is asserted here.
    validate_layout(params, layout, key, options);
    full.layouts.emplace(key, std::move(layout));
  }
  return full;
}

}  // namespace shardwise
