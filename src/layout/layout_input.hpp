// Internal: checks a BufferLayoutInput and walks its params in backprop order.
#pragma once

#include <cstdint>
#include <vector>

#include "shardwise/layout/layout_algorithms.hpp"

namespace shardwise::layout_detail {

struct BackpropParam {
  ParamId id = 0;
  std::int64_t numel = 0;
  std::int64_t param_index = 0;  // index among same-dtype params (passed through)
  bool shared_embedding = false;
  double ns_cost = 0.0;
};

// The buffer's params in backprop order (reverse of forward order). Throws InvalidArgument for a
// missing model, dp < 1, bucket_size < 1, unknown or out-of-order param ids, or param_indices of
// the wrong length. Without param_indices a param's index is its forward position in the buffer.
std::vector<BackpropParam> backprop_params(const BufferLayoutInput& input, const char* algorithm);

}  // namespace shardwise::layout_detail
