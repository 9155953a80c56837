#include "shardwise/model/tensor_parallel.hpp"

#include <algorithm>
#include <vector>

#include "shardwise/core/error.hpp"
#include "shardwise/core/message_text.hpp"

namespace shardwise {

namespace {

// How one shard maps onto its full parameter: the full tensor is [outer, full_extent, inner]
// around the partition dim; shard index k along it is full index `full_index(k)` (or padding).
struct ShardMap {
  std::int64_t outer = 1, inner = 1, shard_extent = 0, full_extent = 0;
  std::int64_t chunk = 0, part = 0, rank = 0;  // chunk per part per rank; full rows per part

  std::int64_t full_index(std::int64_t k) const {
    return k / chunk * part + rank * chunk + k % chunk;
  }
};

ShardMap shard_map(const ParamInfo& full, const ParamInfo& shard, int tp_size, int tp_rank) {
  SW_REQUIRE(tp_size >= 1 && tp_rank >= 0 && tp_rank < tp_size, InvalidArgument, "TP rank ",
             tp_rank, " of ", tp_size, " for parameter '", shard.name, "'");
  SW_REQUIRE(full.name == shard.name && full.shape.size() == shard.shape.size(), ShapeError,
             "TP shard '", shard.name, "' ", shape_text(shard.shape), " does not match full '",
             full.name, "' ", shape_text(full.shape));
  const int d = shard.tp_partition_dim;
  for (int i = 0; i < static_cast<int>(full.shape.size()); ++i) {
    SW_REQUIRE(i == d || full.shape[i] == shard.shape[i], ShapeError, "TP shard '", shard.name,
               "' ", shape_text(shard.shape), " differs from the full ", shape_text(full.shape),
               " in dimension ", i, ", which is not its partition dimension");
  }
  ShardMap m;
  if (d < 0) return m;
  SW_REQUIRE(d < static_cast<int>(full.shape.size()) && shard.tp_stride >= 1 &&
                 shard.shape[d] % shard.tp_stride == 0,
             ShapeError, "TP shard '", shard.name, "': partition dim ", d, ", stride ",
             shard.tp_stride, " do not fit its shape ", shape_text(shard.shape));
  for (int i = 0; i < d; ++i) m.outer *= full.shape[i];
  for (std::size_t i = d + 1; i < full.shape.size(); ++i) m.inner *= full.shape[i];
  m.shard_extent = shard.shape[d];
  m.full_extent = full.shape[d];
  const std::int64_t gathered = m.shard_extent * tp_size;
  // Only an unstrided dim may be padded (the vocabulary); a strided one splits exactly.
  const bool fits = shard.tp_stride == 1 ? gathered >= m.full_extent : gathered == m.full_extent;
  SW_REQUIRE(fits, ShapeError, "TP shard '", shard.name, "' ", shape_text(shard.shape), " x ",
             tp_size, " ranks does not cover the full ", shape_text(full.shape));
  m.chunk = m.shard_extent / shard.tp_stride;
  m.part = gathered / shard.tp_stride;
  m.rank = tp_rank;
  return m;
}

}  // namespace

template <typename Scalar>
void slice_tp_shard(const ParamInfo& full, const ParamInfo& shard, int tp_size, int tp_rank,
                    const Scalar* full_values, Scalar* shard_values) {
  const ShardMap m = shard_map(full, shard, tp_size, tp_rank);
  if (shard.tp_partition_dim < 0) {
    std::copy(full_values, full_values + full.numel(), shard_values);
    return;
  }
  for (std::int64_t o = 0; o < m.outer; ++o) {
    for (std::int64_t k = 0; k < m.shard_extent; ++k) {
      Scalar* dst = shard_values + (o * m.shard_extent + k) * m.inner;
      const std::int64_t f = m.full_index(k);
      if (f >= m.full_extent) {
        std::fill(dst, dst + m.inner, Scalar(0));
        continue;
      }
      const Scalar* src = full_values + (o * m.full_extent + f) * m.inner;
      std::copy(src, src + m.inner, dst);
    }
  }
}

template <typename Scalar>
void place_tp_shard(const ParamInfo& full, const ParamInfo& shard, int tp_size, int tp_rank,
                    const Scalar* shard_values, Scalar* full_values) {
  const ShardMap m = shard_map(full, shard, tp_size, tp_rank);
  if (shard.tp_partition_dim < 0) {
    std::copy(shard_values, shard_values + full.numel(), full_values);
    return;
  }
  for (std::int64_t o = 0; o < m.outer; ++o) {
    for (std::int64_t k = 0; k < m.shard_extent; ++k) {
      const std::int64_t f = m.full_index(k);
      if (f >= m.full_extent) continue;  // vocabulary padding
      const Scalar* src = shard_values + (o * m.shard_extent + k) * m.inner;
      std::copy(src, src + m.inner, full_values + (o * m.full_extent + f) * m.inner);
    }
  }
}

void gather_tp_param(const ParamInfo& full, const ParamInfo& shard, ProcessGroup& tp_group,
                     const float* shard_values, float* full_values) {
  const int size = tp_group.size();
  if (shard.tp_partition_dim < 0) {
    shard_map(full, shard, size, tp_group.rank());  // validates the shapes
    std::copy(shard_values, shard_values + full.numel(), full_values);
    return;
  }
  const std::int64_t count = shard.numel();
  std::vector<float> input(shard_values, shard_values + count);
  std::vector<float> all(static_cast<std::size_t>(count) * size);
  tp_group
      .all_gather({all.data(), count * size, DType::kFloat32},
                  {input.data(), count, DType::kFloat32})
      ->wait();
  for (int r = 0; r < size; ++r)
    place_tp_shard(full, shard, size, r, all.data() + r * count, full_values);
}

#define SHARDWISE_INSTANTIATE_TP_SHARDS(S)                                                     \
  template void slice_tp_shard<S>(const ParamInfo&, const ParamInfo&, int, int, const S*, S*); \
  template void place_tp_shard<S>(const ParamInfo&, const ParamInfo&, int, int, const S*, S*);
SHARDWISE_INSTANTIATE_TP_SHARDS(float)
SHARDWISE_INSTANTIATE_TP_SHARDS(double)

}  // namespace shardwise
