#include "layout_input.hpp"

#include "shardwise/core/error.hpp"

namespace shardwise::layout_detail {

std::vector<BackpropParam> backprop_params(const BufferLayoutInput& input, const char* algorithm) {
  SW_REQUIRE(input.params != nullptr, InvalidArgument, algorithm, " layout: no model params given");
  SW_REQUIRE(input.data_parallel_size >= 1, InvalidArgument, algorithm,
             " layout: data_parallel_size must be >= 1, got ", input.data_parallel_size);
  SW_REQUIRE(!input.bucket_size || *input.bucket_size >= 1, InvalidArgument, algorithm,
             " layout: bucket_size must be >= 1, got ", input.bucket_size.value_or(0));
  SW_REQUIRE(
      input.param_indices.empty() || input.param_indices.size() == input.buffer_params.size(),
      InvalidArgument, algorithm, " layout: ", input.param_indices.size(), " param_indices for ",
      input.buffer_params.size(), " params");
  const ParamList& params = *input.params;
  const std::size_t n = input.buffer_params.size();
  std::vector<BackpropParam> order;
  order.reserve(n);
  for (std::size_t k = 0; k < n; ++k) {
    const std::size_t forward = n - 1 - k;
    const ParamId id = input.buffer_params[forward];
    SW_REQUIRE(id < params.size(), InvalidArgument, algorithm, " layout: param id ", id,
               " out of range (model has ", params.size(), " params)");
    SW_REQUIRE(forward == 0 || input.buffer_params[forward - 1] < id, InvalidArgument, algorithm,
               " layout: buffer params must be in forward (increasing id) order; param ",
               params[id].name, " follows id ", input.buffer_params[forward - 1]);
    const ParamInfo& param = params[id];
    BackpropParam entry;
    entry.id = id;
    entry.numel = param.numel();
    entry.param_index = input.param_indices.empty() ? static_cast<std::int64_t>(forward)
                                                    : input.param_indices[forward];
    entry.shared_embedding = param.shared_embedding;
    entry.ns_cost = newton_schulz_cost(param);
    order.push_back(entry);
  }
  return order;
}

}  // namespace shardwise::layout_detail
