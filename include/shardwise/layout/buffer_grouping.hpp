// Grouping of params into buffers by BufferKey (Megatron's group_params_for_buffers).
#pragma once

#include <map>
#include <vector>

#include "shardwise/layout/layout_options.hpp"
#include "shardwise/layout/param_info.hpp"
#include "shardwise/layout/param_layout.hpp"

namespace shardwise {

struct BufferGroup {
  std::vector<ParamId> params;              // forward order
  std::vector<std::int64_t> param_indices;  // per param: its index in the buffer's index space
};

// BufferKey of one param: param dtype (uint8 for fp8-stored params), grad dtype (explicit, else
// fp32 with grad_reduce_in_fp32, else the param's dtype — its high-precision dtype for fp8),
// expert-parallel flag, and layer-wise flag (set when the algorithm is kLayerWise and the param is
// managed by the layer-wise optimizer, or every param with all_layer_wise).
BufferKey buffer_key_for(const ParamInfo& param, const LayoutOptions& options);

std::map<BufferKey, BufferGroup> group_params_for_buffers(const ParamList& params,
                                                          const LayoutOptions& options);

}  // namespace shardwise
