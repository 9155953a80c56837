// Shard-aligned layout of the LayerWiseDistributedOptimizer.
//
// Walking the buffer in backprop order, the params are cut into buckets (contiguous backprop
// ranges, so DDP can reduce-scatter a bucket as soon as its backward segment ends); each bucket is
// packed into dp equal shards with no param crossing a shard boundary. Shared embeddings sit
// alone in their own bucket at their backprop position.
//
// Where a bucket ends decides how well it can pack: a bucket of total T whose largest param is M
// needs shards of max(ceil(T/dp), M), and a chunk of whole layers often packs perfectly where a
// chunk that cuts a layer cannot. bucket_size is a soft minimum, so every end at or after the
// point where the bucket reaches bucket_size is a candidate, up to a window of a few times what
// the bucket needs (bucket_size, and dp x its largest param so every shard gets work).
// Candidates are ranked by the padding fraction of a cheap LPT packing (a rest of the region too
// small for two buckets is scored together with the candidate, so no badly packing tail is
// stranded); the best few get the full packing (LPT, differencing, capped NS greedy, improving
// moves/swaps) and the smallest waste wins, the earliest end among equals. Then following params
// that fit into the shards' padding join the bucket. Finally the whole plan is compared with the
// plan that cuts at the first reach of bucket_size (same packer) and the one with less padding is
// kept, so the layout never pads more than those plain cut points would. Overlap-aware cuts (the
// default, below) may then trade up to half a point of padding for a smaller last bucket.
//
// Newton–Schulz balance: within a bucket, moves/swaps that keep the shard size even out per-bin
// Newton–Schulz cost; across the buffer, bins go to ranks so that the costliest bin lands on the
// rank with the least accumulated cost. A shared (tied) embedding's bucket always puts the
// embedding in shard 0 (rank 0), as Megatron-LM does.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>

#include "layout_input.hpp"
#include "shard_aligned_buckets.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/layout/padding.hpp"

namespace shardwise {

namespace {

using layout_detail::BackpropParam;
using layout_detail::PlannedBucket;

enum class CutPolicy { kBestPacking, kFirstReach };

// Candidate ends are scanned until the bucket holds this many times what it needs
// (max(bucket_size, dp x largest param)) ...
constexpr std::int64_t kWindowFactor = 4;
// ... or this many candidates. Candidates are ranked by an LPT packing: the earliest ones while
// the items packed stay within the budget, then this many more with the best lower bounds; the
// best-ranked few get the full packing.
constexpr std::size_t kMaxScannedCandidates = 8192;
constexpr std::int64_t kLptWorkBudget = 100'000;
constexpr std::size_t kMaxBoundCandidates = 8;
constexpr std::size_t kMaxPackedCandidates = 3;
// A finalist whose LPT waste exceeds the chosen end's by more than this is not packed in full.
constexpr double kFinalistSlack = 0.02;
// A later (bigger) bucket must waste this much less of its padded size to be preferred.
constexpr double kPaddingFractionTolerance = 1e-4;
// Rounds of "balance NS cost, then absorb params that fit" per bucket.
constexpr int kAbsorbRounds = 3;

struct Candidate {
  std::size_t end = 0;
  double bound_fraction = 0.0;   // padding fraction of the lower-bound shard size
  std::int64_t bound_units = 0;  // that lower-bound shard size
};

class LayerWisePlanner {
 public:
  LayerWisePlanner(const std::vector<BackpropParam>& order, const BufferLayoutInput& input)
      : params_(*input.params),
        order_(order),
        dp_(input.data_parallel_size),
        divisor_units_(
            layer_wise_shard_divisor(input.data_parallel_size, input.pad_for_high_nccl_busbw) /
            kParamStartAlignment),
        bucket_size_(input.bucket_size) {
    const std::size_t n = order_.size();
    region_end_.resize(n + 1, n);
    for (std::size_t i = n; i-- > 0;) {
      region_end_[i] = order_[i].shared_embedding ? i : region_end_[i + 1];
    }
    // Largest param (units) from i to the end of i's region.
    suffix_max_units_.resize(n + 1, 0);
    for (std::size_t i = n; i-- > 0;) {
      const std::int64_t rest =
          region_end_[i] == i + 1 || i + 1 == n ? 0 : suffix_max_units_[i + 1];
      suffix_max_units_[i] = std::max(param_units(order_[i].numel), rest);
    }
    prefix_numel_.resize(n + 1, 0);
    for (std::size_t i = 0; i < n; ++i) prefix_numel_[i + 1] = prefix_numel_[i] + order_[i].numel;
  }

  std::vector<PlannedBucket> plan(CutPolicy policy) const {
    std::vector<PlannedBucket> buckets = plan_from(0, policy);
    assign_bins_to_ranks(buckets);
    return buckets;
  }

  // Buckets from backprop position `start` to the end, without ranks assigned to their bins.
  // Gives up (returns no buckets) once their padding exceeds `max_padding`: the overlap-aware
  // search drops such plans anyway, and stopping early is what keeps it fast.
  std::vector<PlannedBucket> plan_from(
      std::size_t start, CutPolicy policy,
      std::int64_t max_padding = std::numeric_limits<std::int64_t>::max()) const {
    std::vector<PlannedBucket> buckets;
    std::int64_t padded = 0;
    std::size_t a = start;
    while (a < order_.size()) {
      PlannedBucket bucket;
      bucket.begin = a;
      if (order_[a].shared_embedding) {
        bucket.end = a + 1;
        bucket.packing =
            pack_into_shards(layout_detail::pack_items(order_, a, a + 1), dp_, divisor_units_);
      } else {
        const std::size_t region_end = region_end_[a];
        choose_end(bucket, region_end, policy);
        refine(bucket, region_end);
      }
      a = bucket.end;
      padded += bucket_numel(bucket) - numel_between(bucket.begin, bucket.end);
      if (padded > max_padding) return {};
      buckets.push_back(std::move(bucket));
    }
    return buckets;
  }

  std::int64_t bucket_numel(const PlannedBucket& bucket) const {
    return dp_ * bucket.packing.shard_units * kParamStartAlignment;
  }

  std::int64_t padding(const std::vector<PlannedBucket>& buckets) const {
    std::int64_t total = 0;
    for (const auto& b : buckets) {
      total += dp_ * b.packing.shard_units * kParamStartAlignment -
               (prefix_numel_[b.end] - prefix_numel_[b.begin]);
    }
    return total;
  }

  std::int64_t numel_between(std::size_t begin, std::size_t end) const {
    return prefix_numel_[end] - prefix_numel_[begin];
  }

  // Bins of each bucket go to ranks so the costliest bin lands on the rank with the least
  // accumulated Newton–Schulz work over the buffer so far. A shared embedding's bucket is the
  // exception: its one param goes to shard 0, as in Megatron-LM, so the rank that owns a tied
  // embedding does not depend on the rest of the model (its NS work still counts for rank 0).
  void assign_bins_to_ranks(std::vector<PlannedBucket>& buckets) const {
    std::vector<double> accumulated(static_cast<std::size_t>(dp_), 0.0);
    std::vector<std::size_t> bins(static_cast<std::size_t>(dp_));
    std::vector<std::size_t> ranks(static_cast<std::size_t>(dp_));
    for (PlannedBucket& bucket : buckets) {
      const auto& ns = bucket.packing.ns_costs;
      const bool shared = order_[bucket.begin].shared_embedding;
      std::iota(bins.begin(), bins.end(), std::size_t{0});
      std::iota(ranks.begin(), ranks.end(), std::size_t{0});
      if (shared) {
        // The bin holding the embedding first, matched with rank 0.
        std::stable_partition(bins.begin(), bins.end(), [&](std::size_t bin) {
          return static_cast<int>(bin) == bucket.packing.bin_of[0];
        });
      } else {
        std::stable_sort(bins.begin(), bins.end(),
                         [&](std::size_t x, std::size_t y) { return ns[x] > ns[y]; });
        std::stable_sort(ranks.begin(), ranks.end(), [&](std::size_t x, std::size_t y) {
          return accumulated[x] < accumulated[y];
        });
      }
      bucket.rank_of_bin.assign(static_cast<std::size_t>(dp_), 0);
      for (std::size_t i = 0; i < bins.size(); ++i) {
        bucket.rank_of_bin[bins[i]] = static_cast<int>(ranks[i]);
        accumulated[ranks[i]] += ns[bins[i]];
      }
    }
  }

 private:
  double padding_fraction(std::size_t begin, std::size_t end, std::int64_t shard_units) const {
    const double padded = static_cast<double>(dp_) * static_cast<double>(shard_units) *
                          static_cast<double>(kParamStartAlignment);
    const double content = static_cast<double>(prefix_numel_[end] - prefix_numel_[begin]);
    return (padded - content) / padded;
  }

  std::vector<std::int64_t> units_of(std::size_t begin, std::size_t end) const {
    std::vector<std::int64_t> units;
    units.reserve(end - begin);
    for (std::size_t i = begin; i < end; ++i) units.push_back(param_units(order_[i].numel));
    return units;
  }

  // Whether the rest of a region from backprop position `begin` is too small to be cut in two
  // buckets that each reach what a bucket needs (bucket_size, and dp times its largest param to
  // give every shard work), so it is best treated as one bucket.
  bool forms_single_bucket(std::size_t begin, std::size_t region_end) const {
    const std::int64_t numel = prefix_numel_[region_end] - prefix_numel_[begin];
    const std::int64_t need =
        std::max(*bucket_size_, dp_ * suffix_max_units_[begin] * kParamStartAlignment);
    return numel - need < need;
  }

  // Padding fraction of the bucket [begin, end) with the given shard size, counting also the
  // bucket that the rest of the region forms when it is too small for two: ending early must not
  // strand a tail that packs badly.
  double score(std::size_t begin, std::size_t end, std::size_t region_end, std::int64_t shard_units,
               bool full_tail_packing) const {
    double padded = static_cast<double>(dp_) * static_cast<double>(shard_units) *
                    static_cast<double>(kParamStartAlignment);
    const std::int64_t tail = prefix_numel_[region_end] - prefix_numel_[end];
    const bool single_tail = forms_single_bucket(end, region_end);
    if (end < region_end && single_tail) {
      const std::int64_t tail_units =
          full_tail_packing ? pack_into_shards(layout_detail::pack_items(order_, end, region_end),
                                               dp_, divisor_units_)
                                  .shard_units
                            : lpt_shard_units(units_of(end, region_end), dp_, divisor_units_);
      padded += static_cast<double>(dp_) * static_cast<double>(tail_units) *
                static_cast<double>(kParamStartAlignment);
    }
    const double content = static_cast<double>(prefix_numel_[region_end] - prefix_numel_[begin]) -
                           static_cast<double>(single_tail ? 0 : tail);
    return (padded - content) / padded;
  }

  // Candidate ends for a bucket starting at `a`, each with the padding fraction of its lower
  // bound.
  std::vector<Candidate> candidates(std::size_t a, std::size_t region_end, CutPolicy policy) const {
    std::vector<Candidate> out;
    const std::int64_t size = *bucket_size_;
    std::int64_t total_units = 0, max_units = 0;
    auto add = [&](std::size_t end) {
      const std::int64_t bound =
          shard_units_lower_bound(total_units, max_units, dp_, divisor_units_);
      out.push_back({end, padding_fraction(a, end, bound), bound});
    };
    std::size_t b = a;
    bool reached = false;
    while (b < region_end) {
      const std::int64_t units = param_units(order_[b].numel);
      total_units += units;
      max_units = std::max(max_units, units);
      ++b;
      const std::int64_t content = prefix_numel_[b] - prefix_numel_[a];
      if (content < size) continue;
      reached = true;
      add(b);
      if (policy == CutPolicy::kFirstReach) return out;
      const std::int64_t need = std::max(size, dp_ * max_units * kParamStartAlignment);
      if (content >= kWindowFactor * need || out.size() >= kMaxScannedCandidates) break;
    }
    if (!reached) {
      add(region_end);  // the region's remainder is smaller than bucket_size: one bucket
      return out;
    }
    // Rather than leave a tail too small for two buckets, the bucket may run to the region end.
    if (b < region_end && forms_single_bucket(b, region_end)) {
      while (b < region_end) {
        const std::int64_t units = param_units(order_[b].numel);
        total_units += units;
        max_units = std::max(max_units, units);
        ++b;
      }
      add(region_end);
    }
    return out;
  }

  // A cut is phase-aligned when the next bucket starts with the same kind of param as this one
  // (or the region ends there): cutting whole layers leaves whole layers behind, which pack well.
  bool phase_aligned(std::size_t begin, std::size_t end, std::size_t region_end) const {
    return end == region_end || params_[order_[end].id].shape == params_[order_[begin].id].shape;
  }

  struct Scored {
    double fraction = 0.0;
    std::size_t end = 0;
    bool aligned = false;
    double bound_fraction = 0.0;
  };

  // Whether `x` is a better end than `y`: clearly less waste, else a phase-aligned cut, else the
  // earlier (smaller) bucket.
  static bool preferred(const Scored& x, const Scored& y) {
    if (x.fraction < y.fraction - kPaddingFractionTolerance) return true;
    if (x.fraction > y.fraction + kPaddingFractionTolerance) return false;
    if (x.aligned != y.aligned) return x.aligned;
    return x.end < y.end;
  }

  // Whether a candidate whose waste is at least `bound_fraction` could still be preferred to
  // `best`.
  static bool could_beat(double bound_fraction, std::size_t end, bool aligned, const Scored& best) {
    if (bound_fraction < best.fraction - kPaddingFractionTolerance) return true;
    if (bound_fraction > best.fraction + kPaddingFractionTolerance) return false;
    return (aligned && !best.aligned) || (aligned == best.aligned && end < best.end);
  }

  // Ranks candidate ends by the padding of a cheap LPT packing (the lower bound alone is loose:
  // a cut inside a layer often has a perfect bound but no perfect packing), then packs the best
  // few for real and keeps the preferred one.
  void choose_end(PlannedBucket& bucket, std::size_t region_end, CutPolicy policy) const {
    const std::size_t a = bucket.begin;
    if (!bucket_size_) {
      bucket.end = region_end;
      bucket.packing =
          pack_into_shards(layout_detail::pack_items(order_, a, region_end), dp_, divisor_units_);
      return;
    }
    const std::vector<Candidate> cands = candidates(a, region_end, policy);
    std::vector<Scored> ranked;
    std::vector<bool> evaluated(cands.size(), false);
    std::optional<Scored> best;
    std::int64_t work = 0;
    auto evaluate = [&](std::size_t i) {
      const Candidate& c = cands[i];
      evaluated[i] = true;
      const bool aligned = phase_aligned(a, c.end, region_end);
      if (best && !could_beat(c.bound_fraction, c.end, aligned, *best)) return;
      // Up to dp params go one per shard: the bound is exact and needs no packing.
      const bool one_per_shard = c.end - a <= static_cast<std::size_t>(dp_);
      const std::int64_t shard_units =
          one_per_shard ? c.bound_units : lpt_shard_units(units_of(a, c.end), dp_, divisor_units_);
      if (!one_per_shard) work += static_cast<std::int64_t>(c.end - a);
      const Scored scored{score(a, c.end, region_end, shard_units, false), c.end, aligned,
                          c.bound_fraction};
      if (!best || preferred(scored, *best)) best = scored;
      ranked.push_back(scored);
    };
    // Earliest ends first, within a work budget ...
    for (std::size_t i = 0; i < cands.size() && work < kLptWorkBudget; ++i) evaluate(i);
    // ... then the ends with the best bounds among the rest.
    std::vector<std::size_t> by_bound(cands.size());
    std::iota(by_bound.begin(), by_bound.end(), std::size_t{0});
    std::stable_sort(by_bound.begin(), by_bound.end(), [&](std::size_t x, std::size_t y) {
      return cands[x].bound_fraction < cands[y].bound_fraction;
    });
    std::size_t extra = 0;
    for (std::size_t i : by_bound) {
      if (extra == kMaxBoundCandidates) break;
      if (evaluated[i]) continue;
      evaluate(i);
      ++extra;
    }
    SW_CHECK(!ranked.empty(), "no candidate end for the bucket at backprop position ", a);
    // The best few by LPT waste, plus the best phase-aligned one, get the full packing.
    std::stable_sort(ranked.begin(), ranked.end(), [](const Scored& x, const Scored& y) {
      return x.fraction < y.fraction || (x.fraction == y.fraction && x.end < y.end);
    });
    std::vector<Scored> finalists(
        ranked.begin(), ranked.begin() + static_cast<std::ptrdiff_t>(
                                             std::min(ranked.size(), kMaxPackedCandidates)));
    for (const Scored& r : ranked) {
      if (!r.aligned) continue;
      if (std::none_of(finalists.begin(), finalists.end(),
                       [&](const Scored& f) { return f.end == r.end; })) {
        finalists.push_back(r);
      }
      break;
    }
    std::optional<Scored> chosen;
    for (const Scored& f : finalists) {
      if (chosen && !could_beat(f.bound_fraction, f.end, f.aligned, *chosen)) continue;
      // Improvement moves rarely close a wide gap to LPT's result; don't pay for trying.
      if (chosen && f.fraction > chosen->fraction + kFinalistSlack) continue;
      ShardPacking packing =
          pack_into_shards(layout_detail::pack_items(order_, a, f.end), dp_, divisor_units_);
      const Scored scored{score(a, f.end, region_end, packing.shard_units, true), f.end, f.aligned,
                          f.bound_fraction};
      if (!chosen || preferred(scored, *chosen)) {
        chosen = scored;
        bucket.packing = std::move(packing);
      }
    }
    bucket.end = chosen->end;
  }

  // Balances Newton–Schulz cost inside the bucket and lets following params that fit into the
  // shards' padding join it. Ends with an absorption pass, so the next bucket's first param is
  // one that fits nowhere.
  void refine(PlannedBucket& bucket, std::size_t region_end) const {
    for (int round = 0; round < kAbsorbRounds; ++round) {
      std::vector<PackItem> items = layout_detail::pack_items(order_, bucket.begin, bucket.end);
      balance_ns_cost(bucket.packing, items);
      if (!absorb(bucket, region_end)) return;
    }
  }

  bool absorb(PlannedBucket& bucket, std::size_t region_end) const {
    ShardPacking& packing = bucket.packing;
    const std::int64_t capacity = packing.shard_units;
    // (load, bin) ordered; best fit = the fullest bin that still has room.
    std::vector<std::pair<std::int64_t, std::size_t>> by_load;
    by_load.reserve(packing.loads.size());
    for (std::size_t bin = 0; bin < packing.loads.size(); ++bin) {
      by_load.emplace_back(packing.loads[bin], bin);
    }
    std::sort(by_load.begin(), by_load.end());
    bool absorbed = false;
    while (bucket.end < region_end) {
      const BackpropParam& p = order_[bucket.end];
      const std::int64_t units = param_units(p.numel);
      const std::pair<std::int64_t, std::size_t> key{capacity - units, packing.loads.size()};
      auto it = std::upper_bound(by_load.begin(), by_load.end(), key);
      if (it == by_load.begin()) break;
      --it;
      const std::size_t bin = it->second;
      packing.bin_of.push_back(static_cast<int>(bin));
      packing.loads[bin] += units;
      packing.ns_costs[bin] += p.ns_cost;
      // Keep by_load sorted: the bin's entry moves right.
      std::pair<std::int64_t, std::size_t> moved{packing.loads[bin], bin};
      by_load.erase(it);
      by_load.insert(std::upper_bound(by_load.begin(), by_load.end(), moved), moved);
      ++bucket.end;
      absorbed = true;
    }
    return absorbed;
  }

  const ParamList& params_;
  const std::vector<BackpropParam>& order_;
  int dp_;
  std::int64_t divisor_units_;
  std::optional<std::int64_t> bucket_size_;
  std::vector<std::size_t> region_end_;         // first shared embedding at or after i (or n)
  std::vector<std::int64_t> prefix_numel_;      // numel of backprop positions [0, i)
  std::vector<std::int64_t> suffix_max_units_;  // largest param in [i, end of i's region)
};

}  // namespace

// Overlap-aware cuts (BufferLayoutInput::overlap_aware_cuts): the last-dispatched bucket's
// reduce-scatter cannot overlap with backward. The objective is
//   padding elements + kExposedWeight * (S-1)/S * elements of the last bucket,
// i.e. one padding element (held on every rank and sent every step) costs as much as
// 1 / kExposedWeight exposed elements; a plan whose padding exceeds the plain plan's by more than
// kMaxPaddingRise of the buffer is not taken. Candidates re-plan the last bucket's params, and
// the whole buffer, with a bucket size of 1/k of them (k in kTailSplits; never below
// bucket_size) under both cut policies; a candidate with fewer buckets than the plain plan is
// not taken; the least objective wins, the plain plan among equals.
constexpr double kExposedWeight = 1.0 / 8.0;
constexpr double kMaxPaddingRise = 0.005;
constexpr int kTailSplits[] = {2, 3, 4, 6, 8, 12, 16};

double overlap_objective(const LayerWisePlanner& planner, const std::vector<PlannedBucket>& plan,
                         int shards) {
  const double last = static_cast<double>(planner.bucket_numel(plan.back()));
  return static_cast<double>(planner.padding(plan)) +
         kExposedWeight * last * static_cast<double>(shards - 1) / static_cast<double>(shards);
}

std::vector<PlannedBucket> split_last_bucket(const std::vector<BackpropParam>& order,
                                             const BufferLayoutInput& input,
                                             const LayerWisePlanner& planner,
                                             std::vector<PlannedBucket> best) {
  if (best.empty() || order[best.back().begin].shared_embedding) return best;
  const std::size_t tail_begin = best.back().begin;
  double best_score = overlap_objective(planner, best, input.data_parallel_size);
  const std::vector<PlannedBucket> plain = best;
  std::int64_t plain_numel = 0;
  for (const PlannedBucket& b : plain) plain_numel += planner.bucket_numel(b);
  const double padding_limit = static_cast<double>(planner.padding(plain)) +  // the 0.5-point cap
                               kMaxPaddingRise * static_cast<double>(plain_numel);
  // Re-plan from the last bucket's start, and the whole buffer, with smaller bucket sizes.
  const auto shared_embeddings = static_cast<std::int64_t>(std::count_if(
      order.begin(), order.end(), [](const BackpropParam& p) { return p.shared_embedding; }));
  std::vector<std::size_t> starts{tail_begin};
  if (tail_begin != 0) starts.push_back(0);
  for (const std::size_t from : starts) {
    const std::int64_t numel = planner.numel_between(from, order.size());
    const auto kept = static_cast<std::ptrdiff_t>(from == 0 ? 0 : plain.size() - 1);
    const std::vector<PlannedBucket> kept_buckets(plain.begin(), plain.begin() + kept);
    const std::int64_t kept_padding = planner.padding(kept_buckets);
    std::vector<std::int64_t> tried_sizes;
    for (const int k : kTailSplits) {
      BufferLayoutInput split_input = input;
      split_input.bucket_size = std::max(*input.bucket_size, (numel + k - 1) / k);
      // Several k give the same size once numel / k drops below bucket_size: same plans.
      if (std::find(tried_sizes.begin(), tried_sizes.end(), *split_input.bucket_size) !=
          tried_sizes.end()) {
        continue;
      }
      tried_sizes.push_back(*split_input.bucket_size);
      // A whole-buffer plan cannot have more buckets than this (every bucket but a region's last
      // reaches bucket_size; shared embeddings sit alone and end regions): fewer than the plain
      // plan's buckets means it would be dropped below, so it is not planned at all.
      if (from == 0 && numel / *split_input.bucket_size + 2 * shared_embeddings + 1 <
                           static_cast<std::int64_t>(plain.size())) {
        continue;
      }
      const LayerWisePlanner split(order, split_input);
      for (const CutPolicy policy : {CutPolicy::kBestPacking, CutPolicy::kFirstReach}) {
        // The objective is padding plus a non-negative term: a plan whose padding alone passes
        // the cap or the best score so far loses, so its planning stops there.
        const auto max_padding =
            static_cast<std::int64_t>(std::floor(std::min(padding_limit, best_score))) -
            kept_padding;
        std::vector<PlannedBucket> rest = split.plan_from(from, policy, max_padding);
        if (rest.empty()) continue;
        std::vector<PlannedBucket> candidate = kept_buckets;
        for (PlannedBucket& b : rest) candidate.push_back(std::move(b));
        const double score = overlap_objective(planner, candidate, input.data_parallel_size);
        // Only the last bucket is counted, so fewer (bigger) earlier buckets would look free
        // while they overlap less: a candidate must keep at least the plain plan's buckets.
        if (candidate.size() < plain.size()) continue;
        if (static_cast<double>(planner.padding(candidate)) > padding_limit) continue;
        if (score < best_score) {
          best_score = score;
          best = std::move(candidate);
        }
      }
    }
  }
  planner.assign_bins_to_ranks(best);
  return best;
}

PerBufferParamLayout compute_layer_wise_layout(const BufferLayoutInput& input) {
  const auto order = layout_detail::backprop_params(input, "layer-wise");
  const LayerWisePlanner planner(order, input);
  std::vector<PlannedBucket> buckets = planner.plan(CutPolicy::kBestPacking);
  if (input.bucket_size) {
    std::vector<PlannedBucket> first_reach = planner.plan(CutPolicy::kFirstReach);
    if (planner.padding(first_reach) < planner.padding(buckets)) buckets = std::move(first_reach);
    if (input.overlap_aware_cuts)
      buckets = split_last_bucket(order, input, planner, std::move(buckets));
  }
  PerBufferParamLayout layout =
      layout_detail::emit_shard_aligned_layout(order, buckets, input.data_parallel_size);
  validate_layer_wise_bucket_cuts(*input.params, layout);
  return layout;
}

}  // namespace shardwise
