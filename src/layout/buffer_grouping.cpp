#include "shardwise/layout/buffer_grouping.hpp"

#include <tuple>

namespace shardwise {

namespace {

bool is_fp8_stored(DType dtype) { return dtype == DType::kFloat8E4M3; }

// The dtype a param "really" has for bookkeeping: fp8-stored params count as their
// high-precision (bf16) counterparts, as Megatron's fake high-precision dtype does.
DType high_precision_dtype(DType dtype) { return is_fp8_stored(dtype) ? DType::kBFloat16 : dtype; }

DType grad_dtype_for(const ParamInfo& param, const LayoutOptions& options) {
  if (param.grad_dtype) return *param.grad_dtype;
  if (options.grad_reduce_in_fp32) return DType::kFloat32;
  return high_precision_dtype(param.dtype);
}

}  // namespace

BufferKey buffer_key_for(const ParamInfo& param, const LayoutOptions& options) {
  BufferKey key;
  key.param_dtype = is_fp8_stored(param.dtype) ? DType::kUInt8 : param.dtype;
  key.grad_dtype = grad_dtype_for(param, options);
  key.is_expert_parallel = param.expert_parallel;
  key.is_layer_wise = options.algorithm == LayoutAlgorithm::kLayerWise &&
                      (options.all_layer_wise || is_managed_by_layer_wise_optimizer(param));
  return key;
}

std::map<BufferKey, BufferGroup> group_params_for_buffers(const ParamList& params,
                                                          const LayoutOptions& options) {
  std::map<BufferKey, BufferGroup> groups;
  // param_indices count, from 0 in forward order, per (high-precision dtype, grad dtype, expert
  // parallel, layer-wise managed) — Megatron-LM's index spaces: layer-wise and element-sharded
  // buffers each count their own params, and an fp8 param shares the counter of its bf16
  // counterparts (what a non-fp8 checkpoint needs when it is loaded into a native-fp8 model).
  std::map<std::tuple<DType, DType, bool, bool>, std::int64_t> next_index;
  for (ParamId id = 0; id < params.size(); ++id) {
    const ParamInfo& param = params[id];
    const BufferKey key = buffer_key_for(param, options);
    std::int64_t& counter = next_index[{high_precision_dtype(param.dtype), key.grad_dtype,
                                        key.is_expert_parallel, key.is_layer_wise}];
    BufferGroup& group = groups[key];
    group.params.push_back(id);
    group.param_indices.push_back(counter++);
  }
  return groups;
}

}  // namespace shardwise
