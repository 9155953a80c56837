#include "shardwise/model/tp_collectives.hpp"

#include <algorithm>
#include <type_traits>

#include "shardwise/core/error.hpp"

namespace shardwise {

namespace {

// The ProcessGroup reduces fp32 only: the double model (gradient checks) runs without TP.
template <typename Scalar>
TensorView view_of(Scalar* data, std::int64_t count) {
  if constexpr (std::is_same_v<Scalar, float>) {
    return {data, count, DType::kFloat32};
  } else {
    SW_REQUIRE(false, InvalidArgument, "tensor parallelism runs the model in float only");
    return {};
  }
}

}  // namespace

template <typename Scalar>
void tp_all_reduce(const TensorParallelOptions& tp, Scalar* data, std::int64_t count, ReduceOp op) {
  if (!tp.enabled() || count == 0) return;
  tp.group->all_reduce(view_of(data, count), op)->wait();
}

template <typename Scalar>
void tp_all_gather_rows(const TensorParallelOptions& tp, const Scalar* shard,
                        std::int64_t rows_local, std::int64_t cols, std::vector<Scalar>& full) {
  const std::int64_t count = rows_local * cols;
  full.resize(static_cast<std::size_t>(count * tp.size()));
  if (!tp.enabled()) {
    std::copy(shard, shard + count, full.data());
    return;
  }
  // In place: this rank's block of `full` is the input.
  Scalar* mine = full.data() + count * tp.rank();
  std::copy(shard, shard + count, mine);
  tp.group->all_gather(view_of(full.data(), count * tp.size()), view_of(mine, count))->wait();
}

template <typename Scalar>
void tp_reduce_scatter_rows(const TensorParallelOptions& tp, const Scalar* full, std::int64_t rows,
                            std::int64_t cols, std::vector<Scalar>& shard) {
  SW_CHECK(rows % tp.size() == 0, "reduce-scatter of ", rows, " rows over ", tp.size(),
           " TP ranks");
  const std::int64_t count = rows / tp.size() * cols;
  shard.resize(static_cast<std::size_t>(count));
  if (!tp.enabled()) {
    std::copy(full, full + count, shard.data());
    return;
  }
  tp.group
      ->reduce_scatter(view_of(shard.data(), count),
                       view_of(const_cast<Scalar*>(full), count * tp.size()), ReduceOp::kSum)
      ->wait();
}

#define SHARDWISE_INSTANTIATE_TP_COLLECTIVES(S)                                                 \
  template void tp_all_reduce<S>(const TensorParallelOptions&, S*, std::int64_t, ReduceOp);     \
  template void tp_all_gather_rows<S>(const TensorParallelOptions&, const S*, std::int64_t,     \
                                      std::int64_t, std::vector<S>&);                           \
  template void tp_reduce_scatter_rows<S>(const TensorParallelOptions&, const S*, std::int64_t, \
                                          std::int64_t, std::vector<S>&);
SHARDWISE_INSTANTIATE_TP_COLLECTIVES(float)
SHARDWISE_INSTANTIATE_TP_COLLECTIVES(double)

}  // namespace shardwise
