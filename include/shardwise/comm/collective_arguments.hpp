// Argument checks of a process group's operations, shared by the backends (MPI on host memory,
// NCCL on one GPU's memory). Each throws InvalidArgument naming the operation, the group, this
// rank and the argument at fault; the group turns that into a Work that is already completed and
// rethrows it from wait().
#pragma once

#include <climits>
#include <cstdint>
#include <string>
#include <vector>

#include "shardwise/comm/process_group.hpp"

namespace shardwise {

// What a backend takes: where its buffers live, the largest element count it can pass, and how
// its errors name a group.
struct CollectiveArgumentRules {
  const char* group_kind = "group";      // "all_reduce on <group_kind> dp (rank 1 of 4)"
  int device = TensorView::kHostMemory;  // kHostMemory, or the CUDA device every view is on
  std::int64_t max_count = INT_MAX;      // MPI counts and displacements are ints
  const char* host_group_hint = "";      // said when a view is in the wrong memory
};

// Each rank's element count and offset in an all_gather_v's output.
struct GatherCounts {
  std::vector<std::int64_t> counts;
  std::vector<std::int64_t> displacements;
};

class CollectiveArguments {
 public:
  CollectiveArguments() = default;
  CollectiveArguments(std::string group_name, int rank, int size,
                      CollectiveArgumentRules rules = {})
      : group_name_(std::move(group_name)), rank_(rank), size_(size), rules_(rules) {}

  // "all_reduce on group dp (rank 1 of 4)": how errors name an operation.
  std::string where(const char* op) const;

  // A view this backend can read and write: its memory (host or the group's device), a
  // non-negative count, data behind a nonzero count.
  void require_view(const TensorView& v, const char* op, const char* role) const;
  void require_rank(int r, const char* op, const char* role) const;
  // n elements fit the backend's counts (max_count).
  void require_count(std::int64_t n, const char* op, const char* what) const;
  void require_reducible(DType dtype, ReduceOp op, const char* what) const;

  // Each returns whether the call is in place (output / input is exactly this rank's shard of the
  // other); overlapping any other way throws.
  bool reduce_scatter(const TensorView& output, const TensorView& input, ReduceOp op) const;
  bool all_gather(const TensorView& output, const TensorView& input) const;
  bool all_gather_v(const TensorView& output, const TensorView& input,
                    const std::vector<std::int64_t>& counts, GatherCounts& gather) const;

 private:
  void require_same_dtype(const TensorView& a, const TensorView& b, const char* op) const;
  bool aliases_own_shard(const TensorView& part, const TensorView& whole, std::int64_t offset,
                         const char* op, const char* part_role, const char* whole_role) const;

  std::string group_name_;
  int rank_ = 0;
  int size_ = 1;
  CollectiveArgumentRules rules_;
};

}  // namespace shardwise
