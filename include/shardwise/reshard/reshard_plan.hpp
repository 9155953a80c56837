// Reshard planning: from source and destination ShardingSpecs of a set of named parameters, the
// list of point-to-point transfers that moves every destination element exactly once. Every rank
// computes the same global plan independently (pure function of the requests), so send and
// receive task ids agree without any communication.
//
// Determinism: params are planned in name order (the order of the requests does not matter);
// for each param, destination ranks ascending, their boxes in spec order; each destination box is
// covered by intersecting it with source boxes (first the boxes the destination rank holds itself
// - local copies - then every distinct source box in lexicographic order). Task ids count the
// resulting pieces in that order. Between TP layouts of one dimension the pieces are exactly the
// LCM tiling (each a whole block of both layouts); any other pair of specs goes through the same
// N-d box intersection. Among replicas of a source box, the holder with the fewest bytes assigned
// so far sends (ties rotate round-robin).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "shardwise/core/dtype.hpp"
#include "shardwise/reshard/sharding_spec.hpp"

namespace shardwise {

struct ParamReshardRequest {
  std::string name;
  DType dtype = DType::kBFloat16;  // element type on the wire (and of plain local arrays)
  ShardingSpec source;
  ShardingSpec destination;
};

// Pairs source and destination specs by name. Throws InvalidArgument naming every param present
// on one side only.
std::vector<ParamReshardRequest> pair_reshard_requests(
    const std::map<std::string, ShardingSpec>& source,
    const std::map<std::string, ShardingSpec>& destination, DType dtype = DType::kBFloat16);

// One transfer of the global plan.
struct ReshardTask {
  std::int64_t task_id = 0;
  int param_index = 0;  // into ReshardPlan::params
  int src_rank = 0;
  int src_box = 0;  // index into source.boxes_of(src_rank)
  int dst_rank = 0;
  int dst_box = 0;  // index into destination.boxes_of(dst_rank)
  Box global;       // the piece, in global coordinates
  bool operator==(const ReshardTask&) const = default;
};

// One rank's side of a task. A same-rank task appears twice (a send and a recv, same task id,
// peer_rank == own rank); the executor turns it into a local copy.
struct TransferOp {
  std::string param;
  int param_index = 0;
  int peer_rank = 0;
  bool is_send = false;
  Box my_slice;      // the piece inside my box (box-local coordinates)
  Box peer_slice;    // the piece inside the peer's box (its box-local coordinates)
  int my_box = 0;    // index of my box in my side's spec
  int peer_box = 0;  // index of the peer's box in its side's spec
  Box global_slice;  // the piece in global coordinates
  std::int64_t task_id = 0;
  bool operator==(const TransferOp&) const = default;
};

struct GlobalReshardPlan {
  std::vector<ParamReshardRequest> params;  // sorted by name
  std::vector<ReshardTask> tasks;           // by task id (task_id == index)
  std::uint64_t fingerprint = 0;            // hash of the inputs, equal on every rank
};

struct ReshardPlan {
  int my_rank = 0;
  std::shared_ptr<const GlobalReshardPlan> global;
  std::vector<TransferOp> ops;  // by task id; a local task's send comes before its recv

  const std::vector<ParamReshardRequest>& params() const { return global->params; }
  // Index of `name` in params(), or -1.
  int param_index(const std::string& name) const;
  std::int64_t num_tasks() const { return static_cast<std::int64_t>(global->tasks.size()); }
};

// Computes the global plan. Throws InvalidArgument naming the param (and ranks) for duplicate
// names, source/destination shapes that disagree, invalid specs, or a destination box that no
// source covers.
GlobalReshardPlan compute_global_reshard_plan(std::vector<ParamReshardRequest> requests);

// The ops of `my_rank` in a global plan.
ReshardPlan plan_for_rank(std::shared_ptr<const GlobalReshardPlan> global, int my_rank);

// Plans with a cache keyed by the exact serialisation of the requests (names, dtypes, shapes,
// boxes), so repeated refits with the same layouts skip planning. Thread-safe.
class ReshardPlanner {
 public:
  explicit ReshardPlanner(std::size_t capacity = 64) : capacity_(capacity) {}
  ReshardPlan plan(const std::vector<ParamReshardRequest>& requests, int my_rank);
  std::int64_t cache_hits() const;
  std::int64_t cache_misses() const;
  void clear();

 private:
  std::size_t capacity_;
  mutable std::mutex mutex_;
  std::map<std::string, std::shared_ptr<const GlobalReshardPlan>> cache_;
  std::vector<std::string> insertion_order_;  // oldest first, for eviction
  std::int64_t hits_ = 0;
  std::int64_t misses_ = 0;
};

// plan() of a process-wide ReshardPlanner.
ReshardPlan plan_reshard(const std::vector<ParamReshardRequest>& requests, int my_rank);
ReshardPlanner& default_reshard_planner();

// Exact text form of a request list, independent of its order (the cache key).
std::string serialize_reshard_requests(const std::vector<ParamReshardRequest>& requests);

}  // namespace shardwise
