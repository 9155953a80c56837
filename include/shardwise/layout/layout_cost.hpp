// Per-rank cost of a layout: memory held by every rank (param + grad buffers, optimizer state)
// and bytes each rank communicates per step. The cost model behind shard-group choice and the
// layout report.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "shardwise/layout/layout_options.hpp"
#include "shardwise/layout/param_info.hpp"
#include "shardwise/layout/param_layout.hpp"

namespace shardwise {

// All byte counts are per rank. A buffer of N padded elements with S shards over a DP group of G
// ranks (R = G / S replica groups) costs:
//   param_bytes = N * param dtype size, grad_bytes = N * grad dtype size (every rank holds the
//     whole param and grad buffer, padding included);
//   optimizer_state_bytes = N / S * state bytes per element: fp32 main params (4, unless the
//     params are fp32 already) + Muon momentum (4) for layer-wise buffers or AdamW exp_avg and
//     exp_avg_sq (8) for element-sharded ones; plain DDP (S = 1) keeps full state on each rank;
//   comm_bytes = (S-1)/S*N*g (reduce-scatter in the shard group) + 2(R-1)/R*(N/S)*g (all-reduce
//     of the owned shard across the replicas) + (S-1)/S*N*p (all-gather of params), with g / p
//     the grad / param dtype sizes; plain DDP is one all-reduce, 2(G-1)/G*N*g;
//   exposed_rs_bytes = the reduce-scatter bytes of the last-dispatched bucket (the last bucket
//     in backprop order), which cannot overlap with backward.
struct BufferCost {
  std::int64_t numel_padded = 0;
  std::int64_t numel_unpadded = 0;
  int num_shards = 1;  // S
  int replicas = 1;    // R = G / S
  std::int64_t param_bytes = 0;
  std::int64_t grad_bytes = 0;
  std::int64_t optimizer_state_bytes = 0;
  std::int64_t comm_bytes = 0;
  std::int64_t exposed_rs_bytes = 0;

  std::int64_t memory_bytes() const { return param_bytes + grad_bytes + optimizer_state_bytes; }
  std::int64_t padding_numel() const { return numel_padded - numel_unpadded; }
  double padding_fraction() const;  // padding / padded numel (0 for an empty buffer)
  BufferCost& operator+=(const BufferCost& other);
};

struct LayoutCost {
  std::vector<std::pair<BufferKey, BufferCost>> buffers;  // in FullParamLayout order
  BufferCost total;  // sums; num_shards / replicas of the total are meaningless (left at 1)

  double padding_fraction() const;
};

LayoutCost compute_layout_cost(const FullParamLayout& layout, const LayoutOptions& options);

}  // namespace shardwise
