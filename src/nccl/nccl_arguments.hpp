// Argument checks of the NCCL group's operations (private to shardwise_nccl). Each throws
// InvalidArgument naming the operation, the group, this rank and the argument at fault; the group
// turns that into a Work that is already completed and rethrows it from wait().
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "shardwise/comm/process_group.hpp"

namespace shardwise::nccl_detail {

class NcclArguments {
 public:
  NcclArguments(std::string group_name, int rank, int size, int device)
      : group_name_(std::move(group_name)), rank_(rank), size_(size), device_(device) {}

  // "all_reduce on NCCL group dp (rank 1 of 4)": how errors name an operation.
  std::string where(const char* op) const;

  // A view of the group's device: host views and views of another GPU are refused.
  void require_device_view(const TensorView& v, const char* op, const char* role) const;
  void require_rank(int r, const char* op, const char* role) const;
  void require_reducible(DType dtype, ReduceOp op, const char* what) const;

  void reduce_scatter(const TensorView& output, const TensorView& input, ReduceOp op) const;
  void all_gather(const TensorView& output, const TensorView& input) const;
  // Returns each rank's element offset in `output`.
  std::vector<std::int64_t> all_gather_v(const TensorView& output, const TensorView& input,
                                         const std::vector<std::int64_t>& counts) const;

 private:
  void require_same_dtype(const TensorView& a, const TensorView& b, const char* op) const;
  // Passes when `part` is exactly elements [offset, offset + part.numel) of `whole` (NCCL's
  // in-place form) or does not overlap it; throws when they overlap any other way.
  void require_own_shard_or_apart(const TensorView& part, const TensorView& whole,
                                  std::int64_t offset, const char* op, const char* part_role,
                                  const char* whole_role) const;

  std::string group_name_;
  int rank_ = 0;
  int size_ = 1;
  int device_ = 0;
};

}  // namespace shardwise::nccl_detail
