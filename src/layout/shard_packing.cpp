#include "shardwise/layout/shard_packing.hpp"

#include <algorithm>
#include <functional>
#include <limits>
#include <numeric>
#include <queue>
#include <tuple>

#include "shardwise/core/error.hpp"
#include "shardwise/layout/padding.hpp"

namespace shardwise {

namespace {

// Upper bounds on the improvement passes, in item-pair checks. They keep the layout of huge
// models fast and, unlike a time limit, give every rank the same result.
constexpr std::int64_t kMaxLoadCheckBudget = 3'000'000;
constexpr std::int64_t kNsBalanceCheckBudget = 2'000'000;
// Megatron's capped greedy is O(items x bins); only tried as a fallback below this size.
constexpr std::int64_t kCappedGreedyMaxWork = 4'000'000;
// Differencing keeps items x bins partial sums and sorts bins at every merge; it pays off with
// several items per bin, so it is tried for modest bin counts and sizes only.
constexpr std::int64_t kDifferencingMaxWork = 1'000'000;
constexpr int kDifferencingMaxBins = 128;

ShardPacking empty_packing(int bins) {
  ShardPacking packing;
  packing.bins.resize(static_cast<std::size_t>(bins));
  packing.loads.assign(static_cast<std::size_t>(bins), 0);
  packing.ns_costs.assign(static_cast<std::size_t>(bins), 0.0);
  return packing;
}

void place(ShardPacking& packing, std::size_t bin, std::size_t item, const PackItem& it) {
  packing.bins[bin].push_back(item);
  packing.loads[bin] += it.units;
  packing.ns_costs[bin] += it.ns_cost;
}

void finish(ShardPacking& packing, std::int64_t divisor_units) {
  for (auto& bin : packing.bins) std::sort(bin.begin(), bin.end());
  packing.shard_units = pad_to_divisor(packing.max_load(), divisor_units);
}

std::size_t argmax_load(const ShardPacking& packing) {
  return static_cast<std::size_t>(std::max_element(packing.loads.begin(), packing.loads.end()) -
                                  packing.loads.begin());
}

void remove_item(std::vector<std::size_t>& bin, std::size_t item) {
  bin.erase(std::find(bin.begin(), bin.end(), item));
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
  ShardPacking packing = empty_packing(bins);
  using Slot = std::tuple<std::int64_t, double, std::size_t>;
  std::priority_queue<Slot, std::vector<Slot>, std::greater<Slot>> heap;
  for (std::size_t b = 0; b < static_cast<std::size_t>(bins); ++b) heap.emplace(0, 0.0, b);
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
ShardPacking pack_differencing(const std::vector<PackItem>& items, int bins) {
  const std::size_t m = static_cast<std::size_t>(bins);
  struct Partial {
    std::vector<std::int64_t> sums;  // descending
    std::vector<std::vector<std::size_t>> members;
  };
  std::vector<Partial> partials;
  partials.reserve(items.size());
  using Entry = std::tuple<std::int64_t, std::size_t>;  // (spread, -index) max-heap
  std::priority_queue<Entry> heap;
  auto push = [&](Partial partial) {
    const std::int64_t spread = partial.sums.front() - partial.sums.back();
    partials.push_back(std::move(partial));
    heap.emplace(spread, std::numeric_limits<std::size_t>::max() - (partials.size() - 1));
  };
  for (std::size_t i = 0; i < items.size(); ++i) {
    Partial p;
    p.sums.assign(m, 0);
    p.members.resize(m);
    p.sums[0] = items[i].units;
    p.members[0].push_back(i);
    push(std::move(p));
  }
  auto pop = [&] {
    const std::size_t index = std::numeric_limits<std::size_t>::max() - std::get<1>(heap.top());
    heap.pop();
    return std::move(partials[index]);
  };
  while (heap.size() > 1) {
    Partial x = pop();
    Partial y = pop();
    std::vector<std::size_t> order(m);
    Partial merged;
    merged.sums.resize(m);
    merged.members.resize(m);
    for (std::size_t i = 0; i < m; ++i) {
      merged.sums[i] = x.sums[i] + y.sums[m - 1 - i];
      merged.members[i] = std::move(x.members[i]);
      auto& other = y.members[m - 1 - i];
      merged.members[i].insert(merged.members[i].end(), other.begin(), other.end());
    }
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return merged.sums[a] > merged.sums[b]; });
    Partial sorted;
    for (std::size_t i : order) {
      sorted.sums.push_back(merged.sums[i]);
      sorted.members.push_back(std::move(merged.members[i]));
    }
    push(std::move(sorted));
  }
  ShardPacking packing = empty_packing(bins);
  if (heap.empty()) return packing;
  Partial last = pop();
  for (std::size_t b = 0; b < m; ++b) {
    for (std::size_t item : last.members[b]) place(packing, b, item, items[item]);
  }
  return packing;
}

void move_item(ShardPacking& packing, const std::vector<PackItem>& items, std::size_t item,
               std::size_t from, std::size_t to) {
  remove_item(packing.bins[from], item);
  packing.loads[from] -= items[item].units;
  packing.ns_costs[from] -= items[item].ns_cost;
  place(packing, to, item, items[item]);
}

// Second neighbourhood of the max-load search, tried when no single move or swap helps: two
// items of the fullest bin `a` for one smaller item of another bin. Applies the best such swap
// that leaves both bins below the old maximum; returns whether there was one.
bool swap_pair_for_one(ShardPacking& packing, const std::vector<PackItem>& items, std::size_t a,
                       std::int64_t& checks) {
  const std::int64_t load_a = packing.loads[a];
  const auto& bin_a = packing.bins[a];
  std::int64_t best = load_a;
  std::size_t best_x1 = 0, best_x2 = 0, best_b = 0, best_y = 0;
  bool found = false;
  for (std::size_t i = 0; i < bin_a.size(); ++i) {
    for (std::size_t j = i + 1; j < bin_a.size(); ++j) {
      const std::int64_t pair = items[bin_a[i]].units + items[bin_a[j]].units;
      for (std::size_t b = 0; b < packing.bins.size(); ++b) {
        const std::int64_t load_b = packing.loads[b];
        if (b == a || load_b >= load_a - 1) continue;
        for (std::size_t y : packing.bins[b]) {
          ++checks;
          const std::int64_t uy = items[y].units;
          if (uy >= pair || load_b + pair - uy >= load_a) continue;
          const std::int64_t worst = std::max(load_a - pair + uy, load_b + pair - uy);
          if (worst < best) {
            best = worst, best_x1 = bin_a[i], best_x2 = bin_a[j], best_b = b, best_y = y;
            found = true;
          }
        }
      }
      if (checks >= kMaxLoadCheckBudget) break;
    }
    if (checks >= kMaxLoadCheckBudget) break;
  }
  if (!found) return false;
  move_item(packing, items, best_x1, a, best_b);
  move_item(packing, items, best_x2, a, best_b);
  move_item(packing, items, best_y, best_b, a);
  return true;
}

// Local search on the fullest bin: the move or swap with another bin that lowers the larger of
// the two new loads the most, while both stay below the old maximum. Every step strictly
// shrinks the sorted load vector, so it terminates; the check budget bounds its cost.
void reduce_max_load(ShardPacking& packing, const std::vector<PackItem>& items,
                     std::int64_t target) {
  const std::size_t num_bins = packing.bins.size();
  std::int64_t checks = 0;
  while (checks < kMaxLoadCheckBudget) {
    const std::size_t a = argmax_load(packing);
    const std::int64_t load_a = packing.loads[a];
    if (load_a <= target) return;
    std::int64_t best = load_a;
    std::size_t best_x = 0, best_b = 0, best_y = 0;
    bool found = false, is_swap = false;
    for (std::size_t x : packing.bins[a]) {
      const std::int64_t ux = items[x].units;
      for (std::size_t b = 0; b < num_bins; ++b) {
        const std::int64_t load_b = packing.loads[b];
        if (b == a || load_b >= load_a - 1) continue;
        ++checks;
        if (load_b + ux < load_a) {
          const std::int64_t worst = std::max(load_a - ux, load_b + ux);
          if (worst < best) {
            best = worst, best_x = x, best_b = b, found = true, is_swap = false;
          }
        }
        for (std::size_t y : packing.bins[b]) {
          ++checks;
          const std::int64_t uy = items[y].units;
          if (uy >= ux || load_b + ux - uy >= load_a) continue;
          const std::int64_t worst = std::max(load_a - ux + uy, load_b + ux - uy);
          if (worst < best) {
            best = worst, best_x = x, best_b = b, best_y = y, found = true, is_swap = true;
          }
        }
      }
    }
    if (!found) {
      if (!swap_pair_for_one(packing, items, a, checks)) return;
      continue;
    }
    remove_item(packing.bins[a], best_x);
    packing.loads[a] -= items[best_x].units;
    packing.ns_costs[a] -= items[best_x].ns_cost;
    if (is_swap) {
      remove_item(packing.bins[best_b], best_y);
      packing.loads[best_b] -= items[best_y].units;
      packing.ns_costs[best_b] -= items[best_y].ns_cost;
      place(packing, a, best_y, items[best_y]);
    }
    place(packing, best_b, best_x, items[best_x]);
  }
}

}  // namespace

std::int64_t ShardPacking::max_load() const {
  return loads.empty() ? 0 : *std::max_element(loads.begin(), loads.end());
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
  std::sort(units.begin(), units.end(), std::greater<>());
  if (units.size() <= static_cast<std::size_t>(bins)) {
    return pad_to_divisor(units.front(), divisor_units);
  }
  // Min-heap of bin loads; the first `bins` items open one bin each.
  std::vector<std::int64_t> heap(units.begin(), units.begin() + bins);
  std::make_heap(heap.begin(), heap.end(), std::greater<>());
  for (std::size_t i = static_cast<std::size_t>(bins); i < units.size(); ++i) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<>());
    heap.back() += units[i];
    std::push_heap(heap.begin(), heap.end(), std::greater<>());
  }
  return pad_to_divisor(*std::max_element(heap.begin(), heap.end()), divisor_units);
}

std::int64_t param_units(std::int64_t numel) {
  return std::max<std::int64_t>(1, (numel + kParamStartAlignment - 1) / kParamStartAlignment);
}

std::int64_t shard_units_lower_bound(std::int64_t total_units, std::int64_t max_units, int bins,
                                     std::int64_t divisor_units) {
  const std::int64_t mean = (total_units + bins - 1) / bins;
  return pad_to_divisor(std::max(mean, max_units), divisor_units);
}

namespace {

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

ShardPacking pack_into_shards(const std::vector<PackItem>& items, int bins,
                              std::int64_t divisor_units) {
  SW_CHECK(bins >= 1, "pack_into_shards: ", bins, " bins");
  SW_CHECK(divisor_units >= 1, "pack_into_shards: divisor ", divisor_units);
  const std::int64_t bound = whole_item_lower_bound(items, bins, divisor_units);

  if (items.size() <= static_cast<std::size_t>(bins)) {
    // One item per bin reaches the bound (the largest item alone decides the shard size).
    ShardPacking packing = empty_packing(bins);
    for (std::size_t i = 0; i < items.size(); ++i) place(packing, i, i, items[i]);
    finish(packing, divisor_units);
    return packing;
  }
  ShardPacking best = pack_lpt(items, bins, divisor_units);
  if (best.shard_units == bound) return best;
  reduce_max_load(best, items, bound);
  finish(best, divisor_units);
  if (best.shard_units == bound) return best;
  const std::int64_t work = static_cast<std::int64_t>(items.size()) * bins;
  if (work <= kDifferencingMaxWork && bins <= kDifferencingMaxBins) {
    ShardPacking alternative = pack_differencing(items, bins);
    finish(alternative, divisor_units);
    if (alternative.shard_units > bound) {
      reduce_max_load(alternative, items, bound);
      finish(alternative, divisor_units);
    }
    if (alternative.shard_units < best.shard_units) best = std::move(alternative);
    if (best.shard_units == bound) return best;
  }
  if (work <= kCappedGreedyMaxWork) {
    ShardPacking alternative = pack_capped_greedy_by_ns(items, bins, divisor_units);
    if (alternative.shard_units > bound) {
      reduce_max_load(alternative, items, bound);
      finish(alternative, divisor_units);
    }
    if (alternative.shard_units < best.shard_units) best = std::move(alternative);
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
  ShardPacking packing = empty_packing(bins);
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

void balance_ns_cost(ShardPacking& packing, const std::vector<PackItem>& items) {
  const std::size_t num_bins = packing.bins.size();
  const std::int64_t capacity = packing.shard_units;
  std::int64_t checks = 0;
  while (checks < kNsBalanceCheckBudget) {
    const std::size_t a = static_cast<std::size_t>(
        std::max_element(packing.ns_costs.begin(), packing.ns_costs.end()) -
        packing.ns_costs.begin());
    const double ns_a = packing.ns_costs[a];
    // Demand a relative gain so rounding noise cannot make the search cycle.
    double best = ns_a - 1e-9 * ns_a;
    std::size_t best_x = 0, best_b = 0, best_y = 0;
    bool found = false, is_swap = false;
    for (std::size_t x : packing.bins[a]) {
      const double cx = items[x].ns_cost;
      const std::int64_t ux = items[x].units;
      for (std::size_t b = 0; b < num_bins; ++b) {
        const double ns_b = packing.ns_costs[b];
        if (b == a || ns_b >= best) continue;
        ++checks;
        const std::int64_t load_b = packing.loads[b];
        if (load_b + ux <= capacity) {
          const double worst = std::max(ns_a - cx, ns_b + cx);
          if (worst < best) best = worst, best_x = x, best_b = b, found = true, is_swap = false;
        }
        for (std::size_t y : packing.bins[b]) {
          ++checks;
          const double cy = items[y].ns_cost;
          const std::int64_t uy = items[y].units;
          if (cy >= cx || load_b - uy + ux > capacity || packing.loads[a] - ux + uy > capacity) {
            continue;
          }
          const double worst = std::max(ns_a - cx + cy, ns_b - cy + cx);
          if (worst < best) {
            best = worst, best_x = x, best_b = b, best_y = y, found = true, is_swap = true;
          }
        }
      }
    }
    if (!found) break;
    remove_item(packing.bins[a], best_x);
    packing.loads[a] -= items[best_x].units;
    packing.ns_costs[a] -= items[best_x].ns_cost;
    if (is_swap) {
      remove_item(packing.bins[best_b], best_y);
      packing.loads[best_b] -= items[best_y].units;
      packing.ns_costs[best_b] -= items[best_y].ns_cost;
      place(packing, a, best_y, items[best_y]);
    }
    place(packing, best_b, best_x, items[best_x]);
  }
  for (auto& bin : packing.bins) std::sort(bin.begin(), bin.end());
}

}  // namespace shardwise
