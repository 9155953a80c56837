// Argument checks of the MPI group's operations (private to the MPI backend). Each throws
// InvalidArgument naming the operation, the group, this rank and the argument at fault; the group
// turns that into a Work that is already completed and rethrows it from wait().
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "shardwise/comm/process_group.hpp"

namespace shardwise {

// The counts and displacements of an all_gather_v as MPI takes them.
struct GatherCounts {
  std::vector<int> counts;
  std::vector<int> displacements;
};

class CollectiveArguments {
 public:
  CollectiveArguments() = default;
  CollectiveArguments(std::string group_name, int rank, int size)
      : group_name_(std::move(group_name)), rank_(rank), size_(size) {}

  // "all_reduce on group dp (rank 1 of 4)": how errors name an operation.
  std::string where(const char* op) const;

  void require_view(const TensorView& v, const char* op, const char* role) const;
  void require_rank(int r, const char* op, const char* role) const;
  void require_int_count(std::int64_t n, const char* op, const char* what) const;
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
};

}  // namespace shardwise
