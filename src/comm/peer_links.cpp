#include "peer_links.hpp"

#include <algorithm>

#include "shardwise/core/error.hpp"
#include "shardwise/core/streaming_copy.hpp"

namespace shardwise {

namespace {

template <typename T, bool kMax>
void combine_as(void* dst, const void* received, const void* own, std::int64_t n) {
  auto* d = static_cast<T*>(dst);
  const auto* a = static_cast<const T*>(received);
  const auto* b = static_cast<const T*>(own);
  for (std::int64_t i = 0; i < n; ++i) {
    if constexpr (kMax) {
      d[i] = std::max(a[i], b[i]);
    } else {
      d[i] = a[i] + b[i];
    }
  }
}

}  // namespace

ElementCombine element_combine(DType dtype, ReduceOp op) {
  const bool max = op == ReduceOp::kMax;
  switch (dtype) {
    case DType::kFloat32:
      return max ? combine_as<float, true> : combine_as<float, false>;
    case DType::kInt32:
      return max ? combine_as<std::int32_t, true> : combine_as<std::int32_t, false>;
    case DType::kInt64:
      return max ? combine_as<std::int64_t, true> : combine_as<std::int64_t, false>;
    default:
      throw InvariantError(str_cat("no element-wise reduction of ", dtype_name(dtype)));
  }
}

PeerExchangeCollectives::PeerExchangeCollectives(const CollectiveContext& context,
                                                 ReduceScatter reduce_scatter, AllGather all_gather)
    : CollectiveImplementation(context),
      links_{context.p2p_comm, context.rank, context.size, context.wait, context.check},
      reduce_scatter_(reduce_scatter),
      all_gather_(all_gather) {}

void PeerExchangeCollectives::reduce_scatter(const ReduceScatterCall& call) {
  reduce_scatter_(links_, call.input, call.output, call.shard_bytes, dtype_size(call.dtype),
                  element_combine(call.dtype, call.op), scratch_);
}

void PeerExchangeCollectives::all_gather(std::byte* output, const std::byte* own_input,
                                         std::size_t shard_bytes, DType /*dtype*/) {
  if (own_input != nullptr) {
    std::byte* own = output + static_cast<std::size_t>(links_.rank) * shard_bytes;
    copy_into_output(own, own_input, shard_bytes,
                     shard_bytes * static_cast<std::size_t>(links_.size));
  }
  all_gather_(links_, output, shard_bytes);
}

}  // namespace shardwise
