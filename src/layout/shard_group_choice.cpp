#include "shardwise/layout/shard_group_choice.hpp"

#include <algorithm>
#include <cstdio>

#include "shardwise/core/error.hpp"
#include "shardwise/layout/layout_algorithms.hpp"

namespace shardwise {

ShardGroupCandidate shard_group_candidate(int shard_group_size, const LayoutCost& cost) {
  ShardGroupCandidate c;
  c.shard_group_size = shard_group_size;
  c.padding_fraction = cost.padding_fraction();
  c.param_grad_bytes = cost.total.param_bytes + cost.total.grad_bytes;
  c.optimizer_state_bytes = cost.total.optimizer_state_bytes;
  c.comm_bytes = cost.total.comm_bytes;
  c.exposed_rs_bytes = cost.total.exposed_rs_bytes;
  return c;
}

namespace {

// Among candidates with memory <= limit: the least comm, then the largest S.
const ShardGroupCandidate* least_comm_within(const std::vector<ShardGroupCandidate>& table,
                                             double limit) {
  const ShardGroupCandidate* best = nullptr;
  for (const auto& c : table) {
    if (static_cast<double>(c.memory_bytes()) > limit) continue;
    if (!best || c.comm_bytes < best->comm_bytes ||
        (c.comm_bytes == best->comm_bytes && c.shard_group_size > best->shard_group_size)) {
      best = &c;
    }
  }
  return best;
}

}  // namespace

int pick_shard_group_size(const std::vector<ShardGroupCandidate>& table) {
  SW_REQUIRE(!table.empty(), InvalidArgument, "shard group choice: no candidates");
  std::int64_t min_memory = table.front().memory_bytes();
  for (const auto& c : table) min_memory = std::min(min_memory, c.memory_bytes());
  const auto memory = static_cast<double>(min_memory);
  const ShardGroupCandidate* pick =
      least_comm_within(table, memory * (1.0 + kShardGroupMemoryTolerance));
  // A little more memory buys overlap: the least exposed candidate that at least halves the
  // exposed reduce-scatter bytes for at most kShardGroupOverlapMemoryTolerance more memory.
  const ShardGroupCandidate* overlap = nullptr;
  for (const auto& c : table) {
    if (static_cast<double>(c.memory_bytes()) > memory * (1.0 + kShardGroupOverlapMemoryTolerance))
      continue;
    if (2 * c.exposed_rs_bytes > pick->exposed_rs_bytes || c.exposed_rs_bytes == 0) continue;
    if (!overlap || c.exposed_rs_bytes < overlap->exposed_rs_bytes ||
        (c.exposed_rs_bytes == overlap->exposed_rs_bytes && c.comm_bytes < overlap->comm_bytes)) {
      overlap = &c;
    }
  }
  return (overlap ? overlap : pick)->shard_group_size;
}

ShardGroupChoice choose_shard_group_size(const ParamList& params, const LayoutOptions& options) {
  options.validate();
  const int dp = options.data_parallel_size;
  ShardGroupChoice choice;
  choice.shard_group_size = dp;
  if (options.algorithm != LayoutAlgorithm::kLayerWise) return choice;
  for (int s = 1; s <= dp; ++s) {
    if (dp % s != 0) continue;
    LayoutOptions candidate = options;
    candidate.layer_wise_shard_group_size = s;
    const FullParamLayout layout = compute_full_param_layout(params, candidate);
    choice.table.push_back(shard_group_candidate(s, compute_layout_cost(layout, candidate)));
  }
  choice.shard_group_size = pick_shard_group_size(choice.table);
  return choice;
}

std::string render_shard_group_table(const ShardGroupChoice& choice) {
  constexpr double kMiB = 1024.0 * 1024.0;
  std::string out =
      "shard group size (auto): rule = least per-rank memory, then least comm within 1%; "
      "unless halving exposed RS costs <= 5% more memory\n"
      "        S   padding  param+grad MiB  opt-state MiB  memory MiB  comm MiB/step  "
      "exposed RS MiB\n";
  char line[200];
  for (const auto& c : choice.table) {
    std::snprintf(line, sizeof line, "%c %7d  %7.3f%%  %14.1f  %13.1f  %10.1f  %13.1f  %14.1f\n",
                  c.shard_group_size == choice.shard_group_size ? '*' : ' ', c.shard_group_size,
                  100.0 * c.padding_fraction, static_cast<double>(c.param_grad_bytes) / kMiB,
                  static_cast<double>(c.optimizer_state_bytes) / kMiB,
                  static_cast<double>(c.memory_bytes()) / kMiB,
                  static_cast<double>(c.comm_bytes) / kMiB,
                  static_cast<double>(c.exposed_rs_bytes) / kMiB);
    out += line;
  }
  return out;
}

}  // namespace shardwise
