#include "peer_links.hpp"

#include <algorithm>

#include "shardwise/core/error.hpp"

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

}  // namespace shardwise
