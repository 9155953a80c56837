#include "shardwise/layout/shard_packing.hpp"

#include <algorithm>
#include <functional>
#include <limits>
#include <numeric>
#include <optional>
#include <queue>
#include <tuple>

#include "bin_members.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/layout/padding.hpp"

namespace shardwise {

namespace {

using layout_detail::BinMembers;

// Upper bounds on the improvement passes, in item-pair checks. They keep the layout of huge
// models fast and, unlike a time limit, give every rank the same result.
constexpr std::int64_t kMaxLoadCheckBudget = 3'000'000;
constexpr std::int64_t kNsBalanceCheckBudget = 2'000'000;
// The capped greedy by NS cost is O(items x bins); only tried as a fallback below this size.
constexpr std::int64_t kCappedGreedyMaxWork = 4'000'000;
// Differencing keeps items x bins partial sums and sorts bins at every merge; it pays off with
// several items per bin, so it is tried for modest bin counts and sizes only.
constexpr std::int64_t kDifferencingMaxWork = 1'000'000;
constexpr int kDifferencingMaxBins = 128;

ShardPacking empty_packing(std::size_t items, int bins) {
  ShardPacking packing;
  packing.bin_of.assign(items, -1);
  packing.loads.assign(static_cast<std::size_t>(bins), 0);
  packing.ns_costs.assign(static_cast<std::size_t>(bins), 0.0);
  return packing;
}

void place(ShardPacking& packing, std::size_t bin, std::size_t item, const PackItem& it) {
  packing.bin_of[item] = static_cast<int>(bin);
  packing.loads[bin] += it.units;
  packing.ns_costs[bin] += it.ns_cost;
}

void move_item(ShardPacking& packing, const std::vector<PackItem>& items, std::size_t item,
               std::size_t to) {
  const auto from = static_cast<std::size_t>(packing.bin_of[item]);
  packing.loads[from] -= items[item].units;
  packing.ns_costs[from] -= items[item].ns_cost;
  place(packing, to, item, items[item]);
}

void finish(ShardPacking& packing, std::int64_t divisor_units) {
  packing.shard_units = pad_to_divisor(packing.max_load(), divisor_units);
}

std::size_t argmax_load(const ShardPacking& packing) {
  return static_cast<std::size_t>(std::max_element(packing.loads.begin(), packing.loads.end()) -
                                  packing.loads.begin());
}

// LPT without the final rounding (ties: the bin with less Newton–Schulz work, then the lower
// index).
ShardPacking lpt_loads(const std::vector<PackItem>& items, int bins) {
  std::vector<std::size_t> order(items.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    if (items[a].units != items[b].units) return items[a].units > items[b].units;
    return items[a].ns_cost > items[b].ns_cost;
  });
  ShardPacking packing = empty_packing(items.size(), bins);
  using Slot = std::tuple<std::int64_t, double, std::size_t>;
  std::vector<Slot> slots;
  slots.reserve(static_cast<std::size_t>(bins));
  for (std::size_t b = 0; b < static_cast<std::size_t>(bins); ++b) slots.emplace_back(0, 0.0, b);
  std::priority_queue<Slot, std::vector<Slot>, std::greater<Slot>> heap(std::greater<Slot>(),
                                                                        std::move(slots));
  for (std::size_t item : order) {
    const std::size_t bin = std::get<2>(heap.top());
    heap.pop();
    place(packing, bin, item, items[item]);
    heap.emplace(packing.loads[bin], packing.ns_costs[bin], bin);
  }
  return packing;
}

// Karmarkar–Karp differencing for many bins: every item starts as a partial partition with the
// item in one bin; the two partials with the largest spread merge, largest bin with smallest,
// until one partition is left. Often finds packings LPT misses when bins hold several items.
// Partials live in flat arrays; a bin's items are a linked list, so merging is O(bins).
ShardPacking pack_differencing(const std::vector<PackItem>& items, int bins) {
  const std::size_t m = static_cast<std::size_t>(bins);
  const std::size_t k = items.size();
  std::vector<std::int64_t> sums(k * m, 0);  // partial p: slots [p*m, (p+1)*m), descending
  std::vector<int> head(k * m, -1), tail(k * m, -1), next(k, -1);
  using Entry = std::tuple<std::int64_t, std::size_t>;  // (spread, k - partial): max-heap
  std::priority_queue<Entry> heap;
  auto push = [&](std::size_t p) { heap.emplace(sums[p * m] - sums[p * m + m - 1], k - p); };
  for (std::size_t i = 0; i < k; ++i) {
    sums[i * m] = items[i].units;
    head[i * m] = tail[i * m] = static_cast<int>(i);
    push(i);
  }
  auto pop = [&] {
    const std::size_t p = k - std::get<1>(heap.top());
    heap.pop();
    return p;
  };
  std::vector<std::int64_t> merged_sum(m);
  std::vector<int> merged_head(m), merged_tail(m);
  std::vector<std::size_t> order(m);
  while (heap.size() > 1) {
    const std::size_t x = pop();
    const std::size_t y = pop();
    for (std::size_t i = 0; i < m; ++i) {
      const std::size_t xi = x * m + i, yi = y * m + (m - 1 - i);
      merged_sum[i] = sums[xi] + sums[yi];
      if (head[xi] < 0) {
        merged_head[i] = head[yi], merged_tail[i] = tail[yi];
      } else {
        if (head[yi] >= 0) next[static_cast<std::size_t>(tail[xi])] = head[yi];
        merged_head[i] = head[xi];
        merged_tail[i] = head[yi] >= 0 ? tail[yi] : tail[xi];
      }
    }
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return merged_sum[a] > merged_sum[b]; });
    for (std::size_t i = 0; i < m; ++i) {
      sums[x * m + i] = merged_sum[order[i]];
      head[x * m + i] = merged_head[order[i]];
      tail[x * m + i] = merged_tail[order[i]];
    }
    push(x);
  }
  ShardPacking packing = empty_packing(k, bins);
  if (heap.empty()) return packing;
  const std::size_t last = pop();
  for (std::size_t b = 0; b < m; ++b) {
    for (int i = head[last * m + b]; i >= 0; i = next[static_cast<std::size_t>(i)]) {
      place(packing, b, static_cast<std::size_t>(i), items[static_cast<std::size_t>(i)]);
    }
  }
  return packing;
}

// Moves an item and keeps the bin lists in step.
void move_tracked(ShardPacking& packing, BinMembers& members, const std::vector<PackItem>& items,
                  std::size_t item, std::size_t to) {
  members.move(item, static_cast<std::size_t>(packing.bin_of[item]), to);
  move_item(packing, items, item, to);
}

// The other bins for one state of the loads around the fullest bin `a`: sorted by (load, index)
// with the lowest index among each prefix (for the move search), and the bins whose items can be
// swap partners (load below a's by more than one unit), ascending.
struct LoadOrder {
  std::vector<std::size_t> by_load;
  std::vector<std::size_t> lowest_index;  // lowest bin index among by_load[0..k]
  std::vector<std::size_t> swap_bins;
};

LoadOrder load_order(const ShardPacking& packing, std::size_t a) {
  const auto& loads = packing.loads;
  LoadOrder order;
  order.by_load.resize(loads.size());
  std::iota(order.by_load.begin(), order.by_load.end(), std::size_t{0});
  std::sort(order.by_load.begin(), order.by_load.end(), [&](std::size_t x, std::size_t y) {
    return loads[x] != loads[y] ? loads[x] < loads[y] : x < y;
  });
  order.lowest_index.resize(loads.size());
  for (std::size_t k = 0; k < loads.size(); ++k) {
    order.lowest_index[k] =
        k == 0 ? order.by_load[0] : std::min(order.lowest_index[k - 1], order.by_load[k]);
  }
  for (std::size_t b = 0; b < loads.size(); ++b) {
    if (b != a && loads[b] < loads[a] - 1) order.swap_bins.push_back(b);
  }
  return order;
}

// Number of bins (in load order) whose load is below `limit`, or at most `limit` when `inclusive`.
std::size_t bins_below(const ShardPacking& packing, const LoadOrder& order, std::int64_t limit,
                       bool inclusive) {
  const auto it =
      inclusive
          ? std::upper_bound(order.by_load.begin(), order.by_load.end(), limit,
                             [&](std::int64_t v, std::size_t b) { return v < packing.loads[b]; })
          : std::lower_bound(order.by_load.begin(), order.by_load.end(), limit,
                             [&](std::size_t b, std::int64_t v) { return packing.loads[b] < v; });
  return static_cast<std::size_t>(it - order.by_load.begin());
}

// The bin to move an item of `ux` units to out of the fullest bin `a`: among the bins b that end
// below a's load (load_b + ux < load_a, each one check), the one with the lowest larger-of-the-two
// new loads, the lowest index among equals, if that beats `best` (which it then becomes). The same
// choice and count as trying every bin in index order, in O(log bins).
std::optional<std::size_t> best_move_target(const ShardPacking& packing, const LoadOrder& order,
                                            std::int64_t load_a, std::int64_t ux,
                                            std::int64_t& best, std::int64_t& checks) {
  const std::size_t eligible = bins_below(packing, order, load_a - ux, false);
  checks += static_cast<std::int64_t>(eligible);
  if (eligible == 0) return std::nullopt;
  const std::int64_t worst = std::max(load_a - ux, packing.loads[order.by_load[0]] + ux);
  if (worst >= best) return std::nullopt;
  best = worst;
  // Every bin with load_b + ux <= worst reaches it; the first of them in index order wins.
  return order.lowest_index[bins_below(packing, order, worst - ux, true) - 1];
}

// The item y of another bin to swap with `out_units` units leaving the fullest bin `a` (one item
// or a pair of them): y must be smaller, and both bins must end below a's current load. Of those,
// the lowest-index one with the lowest larger-of-the-two new loads, if that beats `best` (which it
// then becomes). Each item of a bin that could take it (order.swap_bins) counts as one check.
std::optional<std::size_t> best_swap_partner(const ShardPacking& packing, const BinMembers& members,
                                             const LoadOrder& order,
                                             const std::vector<PackItem>& items, std::size_t a,
                                             std::int64_t out_units, std::int64_t& best,
                                             std::int64_t& checks) {
  const std::int64_t load_a = packing.loads[a];
  std::optional<std::size_t> best_y;
  for (std::size_t b : order.swap_bins) {
    const std::int64_t load_b = packing.loads[b];
    const std::vector<std::size_t>& in_b = members.of(b);
    checks += static_cast<std::int64_t>(in_b.size());
    for (std::size_t y : in_b) {
      const std::int64_t uy = items[y].units;
      if (uy >= out_units || load_b + out_units - uy >= load_a) continue;
      const std::int64_t worst = std::max(load_a - out_units + uy, load_b + out_units - uy);
      if (worst < best || (worst == best && best_y && y < *best_y)) best = worst, best_y = y;
    }
  }
  return best_y;
}

// Second neighbourhood of the max-load search, tried when no single move or swap helps: two
// items of the fullest bin `a` for one smaller item of another bin. Applies the best such swap
// that leaves both bins below the old maximum; returns whether there was one.
bool swap_pair_for_one(ShardPacking& packing, BinMembers& members, const LoadOrder& order,
                       const std::vector<PackItem>& items, std::size_t a,
                       const std::vector<std::size_t>& in_a, std::int64_t& checks) {
  const std::int64_t load_a = packing.loads[a];
  std::int64_t best = load_a;
  std::size_t best_x1 = 0, best_x2 = 0, best_y = 0;
  bool found = false;
  for (std::size_t i = 0; i < in_a.size() && checks < kMaxLoadCheckBudget; ++i) {
    for (std::size_t j = i + 1; j < in_a.size() && checks < kMaxLoadCheckBudget; ++j) {
      const std::int64_t pair = items[in_a[i]].units + items[in_a[j]].units;
      if (const auto y = best_swap_partner(packing, members, order, items, a, pair, best, checks)) {
        best_x1 = in_a[i], best_x2 = in_a[j], best_y = *y, found = true;
      }
    }
  }
  if (!found) return false;
  const auto b = static_cast<std::size_t>(packing.bin_of[best_y]);
  move_tracked(packing, members, items, best_x1, b);
  move_tracked(packing, members, items, best_x2, b);
  move_tracked(packing, members, items, best_y, a);
  return true;
}

// Local search on the fullest bin: the move or swap with another bin that lowers the larger of
// the two new loads the most, while both stay below the old maximum. Every step strictly
// shrinks the sorted load vector, so it terminates; the check budget bounds its cost.
void reduce_max_load(ShardPacking& packing, const std::vector<PackItem>& items,
                     std::int64_t target) {
  std::int64_t checks = 0;
  BinMembers members(packing);
  while (checks < kMaxLoadCheckBudget) {
    const std::size_t a = argmax_load(packing);
    const std::int64_t load_a = packing.loads[a];
    if (load_a <= target) return;
    const std::vector<std::size_t> in_a = members.of(a);
    const LoadOrder order = load_order(packing, a);
    std::int64_t best = load_a;
    std::size_t best_x = 0, best_b = 0, best_y = 0;
    bool found = false, is_swap = false;
    for (std::size_t x : in_a) {
      const std::int64_t ux = items[x].units;
      if (const auto b = best_move_target(packing, order, load_a, ux, best, checks)) {
        best_x = x, best_b = *b, found = true, is_swap = false;
      }
      if (const auto y = best_swap_partner(packing, members, order, items, a, ux, best, checks)) {
        best_x = x, best_b = static_cast<std::size_t>(packing.bin_of[*y]), best_y = *y;
        found = true, is_swap = true;
      }
    }
    if (!found) {
      if (!swap_pair_for_one(packing, members, order, items, a, in_a, checks)) return;
      continue;
    }
    if (is_swap) move_tracked(packing, members, items, best_y, a);
    move_tracked(packing, members, items, best_x, best_b);
  }
}

// Lower bound on the shard size that also counts whole items: with u sorted descending, among the
// t*bins + 1 largest items some bin holds t + 1, so a shard needs at least the sum of the t + 1
// smallest of them. Tight for identical items, where the mean alone is not.
std::int64_t whole_item_lower_bound(const std::vector<PackItem>& items, int bins,
                                    std::int64_t divisor_units) {
  std::vector<std::int64_t> units;
  units.reserve(items.size());
  std::int64_t total = 0;
  for (const auto& it : items) units.push_back(it.units), total += it.units;
  std::sort(units.begin(), units.end(), std::greater<>());
  std::int64_t bound = units.empty() ? 0 : std::max(units.front(), (total + bins - 1) / bins);
  const std::size_t per_round = static_cast<std::size_t>(bins);
  for (std::size_t t = 1; t * per_round < units.size(); ++t) {
    std::int64_t sum = 0;
    for (std::size_t j = 0; j <= t; ++j) sum += units[t * per_round - j];
    bound = std::max(bound, sum);
  }
  return pad_to_divisor(bound, divisor_units);
}

}  // namespace

std::int64_t ShardPacking::max_load() const {
  return loads.empty() ? 0 : *std::max_element(loads.begin(), loads.end());
}

std::vector<std::vector<std::size_t>> ShardPacking::bins() const {
  std::vector<std::vector<std::size_t>> out(loads.size());
  for (std::size_t i = 0; i < bin_of.size(); ++i) {
    out[static_cast<std::size_t>(bin_of[i])].push_back(i);
  }
  return out;
}

ShardPacking pack_lpt(const std::vector<PackItem>& items, int bins, std::int64_t divisor_units) {
  SW_CHECK(bins >= 1, "pack_lpt: ", bins, " bins");
  ShardPacking packing = lpt_loads(items, bins);
  finish(packing, divisor_units);
  return packing;
}

std::int64_t lpt_shard_units(std::vector<std::int64_t> units, int bins,
                             std::int64_t divisor_units) {
  SW_CHECK(bins >= 1, "lpt_shard_units: ", bins, " bins");
  if (units.empty()) return 0;
  if (units.size() <= static_cast<std::size_t>(bins)) {
    return pad_to_divisor(*std::max_element(units.begin(), units.end()), divisor_units);
  }
  std::sort(units.begin(), units.end(), std::greater<>());
  // Min-heap of bin loads, kept in the first `bins` slots of `units` itself: the largest items
  // open one bin each, every further item goes onto the least-loaded bin.
  const auto heap_end = units.begin() + bins;
  std::make_heap(units.begin(), heap_end, std::greater<>());
  for (std::size_t i = static_cast<std::size_t>(bins); i < units.size(); ++i) {
    std::pop_heap(units.begin(), heap_end, std::greater<>());
    *(heap_end - 1) += units[i];
    std::push_heap(units.begin(), heap_end, std::greater<>());
  }
  return pad_to_divisor(*std::max_element(units.begin(), heap_end), divisor_units);
}

std::int64_t param_units(std::int64_t numel) {
  return std::max<std::int64_t>(1, (numel + kParamStartAlignment - 1) / kParamStartAlignment);
}

std::int64_t shard_units_lower_bound(std::int64_t total_units, std::int64_t max_units, int bins,
                                     std::int64_t divisor_units) {
  const std::int64_t mean = (total_units + bins - 1) / bins;
  return pad_to_divisor(std::max(mean, max_units), divisor_units);
}

ShardPacking pack_into_shards(const std::vector<PackItem>& items, int bins,
                              std::int64_t divisor_units) {
  SW_CHECK(bins >= 1, "pack_into_shards: ", bins, " bins");
  SW_CHECK(divisor_units >= 1, "pack_into_shards: divisor ", divisor_units);
  if (items.size() <= static_cast<std::size_t>(bins)) {
    // One item per bin reaches the bound (the largest item alone decides the shard size).
    ShardPacking packing = empty_packing(items.size(), bins);
    for (std::size_t i = 0; i < items.size(); ++i) place(packing, i, i, items[i]);
    finish(packing, divisor_units);
    return packing;
  }
  const std::int64_t bound = whole_item_lower_bound(items, bins, divisor_units);
  ShardPacking best = pack_lpt(items, bins, divisor_units);
  if (best.shard_units == bound) return best;
  reduce_max_load(best, items, bound);
  finish(best, divisor_units);
  if (best.shard_units == bound) return best;
  const std::int64_t work = static_cast<std::int64_t>(items.size()) * bins;
  auto try_alternative = [&](ShardPacking alternative) {
    finish(alternative, divisor_units);
    if (alternative.shard_units > bound) {
      reduce_max_load(alternative, items, bound);
      finish(alternative, divisor_units);
    }
    if (alternative.shard_units < best.shard_units) best = std::move(alternative);
  };
  if (work <= kDifferencingMaxWork && bins <= kDifferencingMaxBins) {
    try_alternative(pack_differencing(items, bins));
    if (best.shard_units == bound) return best;
  }
  if (work <= kCappedGreedyMaxWork) {
    try_alternative(pack_capped_greedy_by_ns(items, bins, divisor_units));
  }
  return best;
}

ShardPacking pack_capped_greedy_by_ns(const std::vector<PackItem>& items, int bins,
                                      std::int64_t divisor_units, double cap_factor) {
  SW_CHECK(bins >= 1, "pack_capped_greedy_by_ns: ", bins, " bins");
  std::vector<std::size_t> order(items.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return items[a].ns_cost > items[b].ns_cost;
  });
  std::int64_t total = 0;
  for (const auto& it : items) total += it.units;
  const double cap = cap_factor * static_cast<double>(total) / bins;
  ShardPacking packing = empty_packing(items.size(), bins);
  for (std::size_t item : order) {
    const std::int64_t units = items[item].units;
    std::size_t chosen = 0;
    bool fits = false;
    for (std::size_t b = 0; b < packing.loads.size(); ++b) {
      if (static_cast<double>(packing.loads[b] + units) > cap) continue;
      if (!fits || packing.loads[b] < packing.loads[chosen]) chosen = b, fits = true;
    }
    if (!fits) {
      chosen = static_cast<std::size_t>(
          std::min_element(packing.loads.begin(), packing.loads.end()) - packing.loads.begin());
    }
    place(packing, chosen, item, items[item]);
  }
  finish(packing, divisor_units);
  return packing;
}

namespace {

// The swap partners of balance_ns_cost's step out of the costliest bin `a`: the items of the
// other bins whose cost is below the best so far, in increasing item order. As the best only
// falls during a step, a bin once left out stays out: its items are dropped from the list the
// first time they are passed, so a step costs its checks plus one pass over the items, however
// many items of `a` it tries (a pass over every item per tried item made big buckets quadratic).
class NsSwapCandidates {
 public:
  NsSwapCandidates(const ShardPacking& packing, std::size_t a, double best) {
    for (std::size_t y = 0; y < packing.bin_of.size(); ++y) {
      const auto b = static_cast<std::size_t>(packing.bin_of[y]);
      if (b != a && packing.ns_costs[b] < best) items_.push_back(y);
    }
  }

  // The partner for item x (cx, ux) as a scan over every item in order would find it: the first
  // with the lowest larger-of-the-two new costs below `best` (which it then becomes), both loads
  // within `capacity`. Counts as checks the items whose bin's cost is below `best` when reached.
  std::optional<std::size_t> best_partner(const ShardPacking& packing,
                                          const std::vector<PackItem>& items, std::size_t x,
                                          std::size_t a, std::int64_t capacity, double& best,
                                          std::int64_t& checks) {
    const double cx = items[x].ns_cost, ns_a = packing.ns_costs[a];
    const std::int64_t ux = items[x].units, load_a = packing.loads[a];
    std::optional<std::size_t> best_y;
    std::size_t kept = 0;
    for (std::size_t i = 0; i < items_.size(); ++i) {
      const std::size_t y = items_[i];
      const auto b = static_cast<std::size_t>(packing.bin_of[y]);
      const double ns_b = packing.ns_costs[b];
      if (ns_b >= best) continue;  // dropped for good
      items_[kept++] = y;
      ++checks;
      const double cy = items[y].ns_cost;
      const std::int64_t uy = items[y].units;
      if (cy >= cx || packing.loads[b] - uy + ux > capacity || load_a - ux + uy > capacity) {
        continue;
      }
      const double worst = std::max(ns_a - cx + cy, ns_b - cy + cx);
      if (worst < best) best = worst, best_y = y;
    }
    items_.resize(kept);
    return best_y;
  }

 private:
  std::vector<std::size_t> items_;
};

}  // namespace

void balance_ns_cost(ShardPacking& packing, const std::vector<PackItem>& items) {
  const std::size_t num_bins = packing.loads.size();
  const std::int64_t capacity = packing.shard_units;
  std::int64_t checks = 0;
  std::vector<std::size_t> in_a;
  while (checks < kNsBalanceCheckBudget) {
    const std::size_t a = static_cast<std::size_t>(
        std::max_element(packing.ns_costs.begin(), packing.ns_costs.end()) -
        packing.ns_costs.begin());
    const double ns_a = packing.ns_costs[a];
    // Demand a relative gain so rounding noise cannot make the search cycle.
    double best = ns_a - 1e-9 * ns_a;
    std::size_t best_x = 0, best_b = 0, best_y = 0;
    bool found = false, is_swap = false;
    in_a.clear();
    for (std::size_t i = 0; i < packing.bin_of.size(); ++i) {
      if (packing.bin_of[i] == static_cast<int>(a)) in_a.push_back(i);
    }
    NsSwapCandidates partners(packing, a, best);
    for (std::size_t x : in_a) {
      const double cx = items[x].ns_cost;
      const std::int64_t ux = items[x].units;
      for (std::size_t b = 0; b < num_bins; ++b) {
        if (b == a || packing.ns_costs[b] >= best || packing.loads[b] + ux > capacity) continue;
        ++checks;
        const double worst = std::max(ns_a - cx, packing.ns_costs[b] + cx);
        if (worst < best) best = worst, best_x = x, best_b = b, found = true, is_swap = false;
      }
      if (const auto y = partners.best_partner(packing, items, x, a, capacity, best, checks)) {
        best_x = x, best_b = static_cast<std::size_t>(packing.bin_of[*y]), best_y = *y;
        found = true, is_swap = true;
      }
    }
    if (!found) break;
    if (is_swap) move_item(packing, items, best_y, a);
    move_item(packing, items, best_x, best_b);
  }
}

}  // namespace shardwise
