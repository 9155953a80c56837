#include "collective_implementation.hpp"

namespace shardwise {

float* CollectiveImplementation::reduce_scatter_staged(float* data, std::int64_t shard,
                                                       ReduceOp op) {
  const std::size_t shard_bytes = static_cast<std::size_t>(shard) * sizeof(float);
  auto* bytes = reinterpret_cast<std::byte*>(data);
  ReduceScatterCall call;
  call.input = bytes;
  call.output = bytes + static_cast<std::size_t>(context_.rank) * shard_bytes;
  call.shard_bytes = shard_bytes;
  call.dtype = DType::kFloat32;
  call.op = op;
  call.in_place = true;
  reduce_scatter(call);
  return data + context_.rank * shard;
}

bool CollectiveImplementation::all_reduce(std::byte* /*data*/, std::int64_t /*numel*/,
                                          DType /*dtype*/, ReduceOp /*op*/) {
  return false;
}

}  // namespace shardwise
