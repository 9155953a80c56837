// Packing the params of one bucket into dp equal shards (multiway number partitioning) for the
// shard-aligned layer-wise layout. Sizes are in 64-element units: every param start is 64-aligned,
// so a param of n elements occupies ceil(n/64) units of its shard (at least one).
#pragma once

#include <cstdint>
#include <vector>

namespace shardwise {

struct PackItem {
  std::int64_t units = 1;  // 64-element slots the param occupies
  double ns_cost = 0.0;    // Newton–Schulz work of its optimizer step
};

// Flat on purpose (item -> bin, no per-bin lists): packings are built thousands of times per
// layout, and per-bin allocations dominated the cost.
struct ShardPacking {
  std::vector<int> bin_of;          // per item: its bin
  std::vector<std::int64_t> loads;  // units per bin
  std::vector<double> ns_costs;     // Newton–Schulz cost per bin
  std::int64_t shard_units = 0;     // shard size: max load rounded up to the divisor

  int num_bins() const { return static_cast<int>(loads.size()); }
  std::int64_t max_load() const;
  // Item indices of each bin, ascending.
  std::vector<std::vector<std::size_t>> bins() const;
};

// 64-element units a param of `numel` elements occupies (at least one, so that even an empty
// param has an owning shard).
std::int64_t param_units(std::int64_t numel);

// Smallest possible shard size (units) for items of total `total_units` whose largest is
// `max_units`: max(ceil(total/bins), max) rounded up to `divisor_units`.
std::int64_t shard_units_lower_bound(std::int64_t total_units, std::int64_t max_units, int bins,
                                     std::int64_t divisor_units);

// Longest processing time first: items by size (descending, ties by NS cost), each onto the
// least-loaded bin. Cheap (items x log bins); the layer-wise layout uses it to rank bucket ends.
ShardPacking pack_lpt(const std::vector<PackItem>& items, int bins, std::int64_t divisor_units);

// Shard size (units, rounded to the divisor) that LPT reaches for items of these sizes, without
// building the packing: a cheap estimate to rank candidate buckets. Exact when there are no more
// items than bins.
std::int64_t lpt_shard_units(std::vector<std::int64_t> units, int bins, std::int64_t divisor_units);

// Packs items into `bins` bins minimising the shard size: longest-processing-time first, then
// bounded improvement moves/swaps out of the fullest bin, also trying the NS-ordered capped greedy
// below; keeps the best. Deterministic; work is bounded by item/bin counts, never time.
ShardPacking pack_into_shards(const std::vector<PackItem>& items, int bins,
                              std::int64_t divisor_units);

// Capped greedy by Newton–Schulz cost: items by NS cost (descending) onto the least-loaded bin
// whose load stays within cap_factor x the mean load, else onto the least-loaded bin.
ShardPacking pack_capped_greedy_by_ns(const std::vector<PackItem>& items, int bins,
                                      std::int64_t divisor_units, double cap_factor = 1.3);

// Evens out per-bin Newton–Schulz cost with moves/swaps that keep every load within
// packing.shard_units (so the shard size, hence padding, is unchanged). Bounded work.
void balance_ns_cost(ShardPacking& packing, const std::vector<PackItem>& items);

}  // namespace shardwise
