#include <algorithm>
#include <set>
#include <sstream>

#include "shardwise/core/error.hpp"
#include "shardwise/core/fnv1a.hpp"
#include "shardwise/reshard/reshard_plan.hpp"

namespace shardwise {
namespace {

// A distinct source box with every (rank, box index) that holds it.
struct SourceBox {
  Box box;
  std::vector<std::pair<int, int>> holders;  // ascending rank
};

// Chooses which replica sends a piece: fewest bytes assigned so far, ties rotate.
class ReplicaChooser {
 public:
  int choose(const std::vector<std::pair<int, int>>& holders, std::int64_t bytes) {
    std::int64_t least = INT64_MAX;
    for (const auto& [rank, box] : holders) least = std::min(least, load_[rank]);
    std::vector<std::size_t> tied;
    for (std::size_t i = 0; i < holders.size(); ++i) {
      if (load_[holders[i].first] == least) tied.push_back(i);
    }
    const std::size_t pick = tied[static_cast<std::size_t>(turn_++) % tied.size()];
    load_[holders[pick].first] += bytes;
    return static_cast<int>(pick);
  }
  // A local copy keeps its rank busy too.
  void add_local(int rank, std::int64_t bytes) { load_[rank] += bytes; }

 private:
  std::map<int, std::int64_t> load_;
  std::uint64_t turn_ = 0;
};

void plan_param(const ParamReshardRequest& req, int param_index, ReplicaChooser& chooser,
                std::vector<ReshardTask>& tasks) {
  SW_REQUIRE(req.source.global_shape == req.destination.global_shape, InvalidArgument, "param ",
             req.name, ": source shape ", to_string(req.source.global_shape),
             " differs from destination shape ", to_string(req.destination.global_shape));
  validate_sharding(req.name + " (source)", req.source);
  validate_sharding(req.name + " (destination)", req.destination);

  std::map<Box, SourceBox> distinct;  // lexicographic order
  for (const auto& [rank, boxes] : req.source.boxes_by_rank) {
    for (std::size_t i = 0; i < boxes.size(); ++i) {
      SourceBox& s = distinct[boxes[i]];
      s.box = boxes[i];
      s.holders.emplace_back(rank, static_cast<int>(i));
    }
  }
  const std::int64_t elem = static_cast<std::int64_t>(dtype_size(req.dtype));

  for (const auto& [dst_rank, dst_boxes] : req.destination.boxes_by_rank) {
    const std::vector<Box>& own_sources = req.source.boxes_of(dst_rank);
    for (std::size_t b = 0; b < dst_boxes.size(); ++b) {
      std::vector<Box> uncovered{dst_boxes[b]};
      auto cover_with = [&](const Box& source_box, auto&& pick_holder) {
        std::vector<Box> next;
        for (const Box& region : uncovered) {
          const std::optional<Box> piece = intersect(region, source_box);
          if (!piece) {
            next.push_back(region);
            continue;
          }
          const auto [src_rank, src_box] = pick_holder(piece->numel() * elem);
          tasks.push_back({static_cast<std::int64_t>(tasks.size()), param_index, src_rank, src_box,
                           dst_rank, static_cast<int>(b), *piece});
          for (Box& rest : subtract(region, *piece)) next.push_back(std::move(rest));
        }
        uncovered = std::move(next);
      };
      // Local copies first: whatever the destination rank already holds.
      for (std::size_t i = 0; i < own_sources.size() && !uncovered.empty(); ++i) {
        cover_with(own_sources[i], [&](std::int64_t bytes) {
          chooser.add_local(dst_rank, bytes);
          return std::pair<int, int>{dst_rank, static_cast<int>(i)};
        });
      }
      for (const auto& [box, source] : distinct) {
        if (uncovered.empty()) break;
        cover_with(box, [&](std::int64_t bytes) {
          return source.holders[static_cast<std::size_t>(chooser.choose(source.holders, bytes))];
        });
      }
      SW_REQUIRE(uncovered.empty(), InvalidArgument, "param ", req.name, ": destination rank ",
                 dst_rank, " box ", to_string(dst_boxes[b]), " is not covered by any source rank ",
                 "(first uncovered slice ", to_string(uncovered.front()), "; source ranks hold ",
                 req.source.serialize(), ")");
    }
  }
}

}  // namespace

std::vector<ParamReshardRequest> pair_reshard_requests(
    const std::map<std::string, ShardingSpec>& source,
    const std::map<std::string, ShardingSpec>& destination, DType dtype) {
  std::string only_source, only_destination;
  for (const auto& [name, spec] : source) {
    if (!destination.count(name)) only_source += (only_source.empty() ? "" : ", ") + name;
  }
  for (const auto& [name, spec] : destination) {
    if (!source.count(name)) only_destination += (only_destination.empty() ? "" : ", ") + name;
  }
  SW_REQUIRE(only_source.empty() && only_destination.empty(), InvalidArgument,
             "reshard: params missing a side: only in source: {", only_source,
             "}; only in destination: {", only_destination, "}");
  std::vector<ParamReshardRequest> out;
  for (const auto& [name, spec] : source) out.push_back({name, dtype, spec, destination.at(name)});
  return out;
}

std::string serialize_reshard_requests(const std::vector<ParamReshardRequest>& requests) {
  std::vector<const ParamReshardRequest*> sorted;
  for (const auto& r : requests) sorted.push_back(&r);
  std::sort(sorted.begin(), sorted.end(),
            [](const auto* a, const auto* b) { return a->name < b->name; });
  std::ostringstream out;
  for (const auto* r : sorted) {
    out << r->name.size() << ':' << r->name << ' ' << dtype_name(r->dtype) << ' '
        << r->source.serialize() << " -> " << r->destination.serialize() << '\n';
  }
  return out.str();
}

GlobalReshardPlan compute_global_reshard_plan(std::vector<ParamReshardRequest> requests) {
  std::sort(requests.begin(), requests.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  for (std::size_t i = 1; i < requests.size(); ++i) {
    SW_REQUIRE(requests[i].name != requests[i - 1].name, InvalidArgument, "reshard: param ",
               requests[i].name, " is requested more than once");
  }
  GlobalReshardPlan plan;
  plan.fingerprint = fnv1a(serialize_reshard_requests(requests));
  ReplicaChooser chooser;
  for (std::size_t p = 0; p < requests.size(); ++p) {
    plan_param(requests[p], static_cast<int>(p), chooser, plan.tasks);
  }
  plan.params = std::move(requests);
  return plan;
}

ReshardPlan plan_for_rank(std::shared_ptr<const GlobalReshardPlan> global, int my_rank) {
  SW_REQUIRE(global != nullptr, InvalidArgument, "plan_for_rank: the global plan is null");
  ReshardPlan plan;
  plan.my_rank = my_rank;
  for (const ReshardTask& t : global->tasks) {
    if (t.src_rank != my_rank && t.dst_rank != my_rank) continue;
    const ParamReshardRequest& req = global->params[static_cast<std::size_t>(t.param_index)];
    const Box& src_box = req.source.boxes_of(t.src_rank)[static_cast<std::size_t>(t.src_box)];
    const Box& dst_box = req.destination.boxes_of(t.dst_rank)[static_cast<std::size_t>(t.dst_box)];
    const Box in_src = relative_to(t.global, src_box);
    const Box in_dst = relative_to(t.global, dst_box);
    if (t.src_rank == my_rank) {
      plan.ops.push_back({req.name, t.param_index, t.dst_rank, true, in_src, in_dst, t.src_box,
                          t.dst_box, t.global, t.task_id});
    }
    if (t.dst_rank == my_rank) {
      plan.ops.push_back({req.name, t.param_index, t.src_rank, false, in_dst, in_src, t.dst_box,
                          t.src_box, t.global, t.task_id});
    }
  }
  plan.global = std::move(global);
  return plan;
}

int ReshardPlan::param_index(const std::string& name) const {
  const auto& params = global->params;
  const auto it = std::lower_bound(params.begin(), params.end(), name,
                                   [](const auto& p, const std::string& n) { return p.name < n; });
  return it != params.end() && it->name == name ? static_cast<int>(it - params.begin()) : -1;
}

ReshardPlan ReshardPlanner::plan(const std::vector<ParamReshardRequest>& requests, int my_rank) {
  const std::string key = serialize_reshard_requests(requests);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = cache_.find(key);
    if (it != cache_.end()) {
      ++hits_;
      return plan_for_rank(it->second, my_rank);
    }
  }
  auto global = std::make_shared<const GlobalReshardPlan>(compute_global_reshard_plan(requests));
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++misses_;
    if (cache_.emplace(key, global).second) {
      insertion_order_.push_back(key);
      while (capacity_ > 0 && cache_.size() > capacity_) {
        cache_.erase(insertion_order_.front());
        insertion_order_.erase(insertion_order_.begin());
      }
    }
  }
  return plan_for_rank(std::move(global), my_rank);
}

std::int64_t ReshardPlanner::cache_hits() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return hits_;
}

std::int64_t ReshardPlanner::cache_misses() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return misses_;
}

void ReshardPlanner::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  cache_.clear();
  insertion_order_.clear();
}

ReshardPlanner& default_reshard_planner() {
  static ReshardPlanner planner;
  return planner;
}

ReshardPlan plan_reshard(const std::vector<ParamReshardRequest>& requests, int my_rank) {
  return default_reshard_planner().plan(requests, my_rank);
}

}  // namespace shardwise
