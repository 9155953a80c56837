#include "shardwise/comm/collective_arguments.hpp"

#include "shardwise/core/error.hpp"

namespace shardwise {

namespace {

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "SUM";
    case ReduceOp::kAvg:
      return "AVG";
    case ReduceOp::kMax:
      return "MAX";
  }
  return "?";
}

bool byte_ranges_overlap(const TensorView& a, const TensorView& b) {
  if (a.numel == 0 || b.numel == 0) return false;
  const auto* a0 = static_cast<const std::byte*>(a.data);
  const auto* b0 = static_cast<const std::byte*>(b.data);
  return a0 < b0 + b.nbytes() && b0 < a0 + a.nbytes();
}

}  // namespace

std::string CollectiveArguments::where(const char* op) const {
  return str_cat(op, " on ", rules_.group_kind, " ", group_name_, " (rank ", rank_, " of ", size_,
                 ")");
}

void CollectiveArguments::require_view(const TensorView& v, const char* op,
                                       const char* role) const {
  if (rules_.device == TensorView::kHostMemory) {
    SW_REQUIRE(!v.on_device(), InvalidArgument, where(op), ": ", role, " lives on CUDA device ",
               v.device, "; this group moves host memory only", rules_.host_group_hint);
  } else {
    SW_REQUIRE(v.on_device(), InvalidArgument, where(op), ": ", role,
               " is in host memory; the group takes buffers on CUDA device ", rules_.device,
               rules_.host_group_hint);
    SW_REQUIRE(v.device == rules_.device, InvalidArgument, where(op), ": ", role,
               " is on CUDA device ", v.device, " but the group's communicator is on device ",
               rules_.device);
  }
  SW_REQUIRE(v.numel >= 0, InvalidArgument, where(op), ": ", role, " has ", v.numel, " elements");
  SW_REQUIRE(v.numel == 0 || v.data != nullptr, InvalidArgument, where(op), ": ", role, " of ",
             v.numel, " elements has no data");
}

void CollectiveArguments::require_same_dtype(const TensorView& a, const TensorView& b,
                                             const char* op) const {
  SW_REQUIRE(a.dtype == b.dtype, InvalidArgument, where(op), ": output is ", dtype_name(a.dtype),
             " but input is ", dtype_name(b.dtype));
}

void CollectiveArguments::require_reducible(DType dtype, ReduceOp op, const char* what) const {
  const bool floating =
      dtype == DType::kFloat32 || dtype == DType::kBFloat16 || dtype == DType::kFloat16;
  const bool integer = dtype == DType::kInt32 || dtype == DType::kInt64;
  SW_REQUIRE(floating || (integer && op != ReduceOp::kAvg), InvalidArgument, where(what),
             ": cannot reduce ", dtype_name(dtype), " with ", reduce_op_name(op),
             " (reductions take fp32, bf16 or fp16 with SUM/AVG/MAX, int32 or int64 with "
             "SUM/MAX)");
}

void CollectiveArguments::require_count(std::int64_t n, const char* op, const char* what) const {
  SW_REQUIRE(n <= rules_.max_count, InvalidArgument, where(op), ": ", what, " of ", n,
             " elements exceeds the backend's count limit ", rules_.max_count);
}

void CollectiveArguments::require_rank(int r, const char* op, const char* role) const {
  SW_REQUIRE(r >= 0 && r < size_, InvalidArgument, where(op), ": ", role, " ", r,
             " is not a rank of the group");
}

// True when `part` is exactly elements [offset, offset + part.numel) of `whole` (the in-place
// form); false when they do not overlap; throws when they overlap any other way.
bool CollectiveArguments::aliases_own_shard(const TensorView& part, const TensorView& whole,
                                            std::int64_t offset, const char* op,
                                            const char* part_role, const char* whole_role) const {
  if (!byte_ranges_overlap(part, whole)) return false;
  const TensorView own = whole.slice(offset, part.numel);
  SW_REQUIRE(own.data == part.data, InvalidArgument, where(op), ": ", part_role, " overlaps ",
             whole_role, " but is not this rank's shard of it (elements [", offset, ", ",
             offset + part.numel, "))");
  return true;
}

bool CollectiveArguments::reduce_scatter(const TensorView& output, const TensorView& input,
                                         ReduceOp op) const {
  require_view(output, "reduce_scatter", "output");
  require_view(input, "reduce_scatter", "input");
  require_same_dtype(output, input, "reduce_scatter");
  require_reducible(input.dtype, op, "reduce_scatter");
  SW_REQUIRE(input.numel == output.numel * size_, InvalidArgument, where("reduce_scatter"),
             ": input has ", input.numel, " elements, expected ", size_, " shards of the output's ",
             output.numel);
  require_count(output.numel, "reduce_scatter", "shard");
  return aliases_own_shard(output, input, rank_ * output.numel, "reduce_scatter", "output",
                           "input");
}

bool CollectiveArguments::all_gather(const TensorView& output, const TensorView& input) const {
  require_view(output, "all_gather", "output");
  require_view(input, "all_gather", "input");
  require_same_dtype(output, input, "all_gather");
  SW_REQUIRE(output.numel == input.numel * size_, InvalidArgument, where("all_gather"),
             ": output has ", output.numel, " elements, expected ", size_,
             " shards of the input's ", input.numel);
  require_count(input.numel, "all_gather", "shard");
  return aliases_own_shard(input, output, rank_ * input.numel, "all_gather", "input", "output");
}

bool CollectiveArguments::all_gather_v(const TensorView& output, const TensorView& input,
                                       const std::vector<std::int64_t>& counts,
                                       GatherCounts& gather) const {
  require_view(output, "all_gather_v", "output");
  require_view(input, "all_gather_v", "input");
  require_same_dtype(output, input, "all_gather_v");
  SW_REQUIRE(counts.size() == static_cast<std::size_t>(size_), InvalidArgument,
             where("all_gather_v"), ": ", counts.size(), " counts for ", size_, " ranks");
  gather.counts.assign(static_cast<std::size_t>(size_), 0);
  gather.displacements.assign(static_cast<std::size_t>(size_), 0);
  std::int64_t total = 0;
  for (int r = 0; r < size_; ++r) {
    const std::int64_t c = counts[static_cast<std::size_t>(r)];
    SW_REQUIRE(c >= 0, InvalidArgument, where("all_gather_v"), ": count of rank ", r, " is ", c);
    require_count(total, "all_gather_v", "displacement");
    require_count(c, "all_gather_v", "count");
    gather.counts[static_cast<std::size_t>(r)] = c;
    gather.displacements[static_cast<std::size_t>(r)] = total;
    total += c;
  }
  SW_REQUIRE(input.numel == counts[static_cast<std::size_t>(rank_)], InvalidArgument,
             where("all_gather_v"), ": input has ", input.numel, " elements but counts[", rank_,
             "] is ", counts[static_cast<std::size_t>(rank_)]);
  SW_REQUIRE(output.numel == total, InvalidArgument, where("all_gather_v"), ": output has ",
             output.numel, " elements but the counts add up to ", total);
  return aliases_own_shard(input, output, gather.displacements[static_cast<std::size_t>(rank_)],
                           "all_gather_v", "input", "output");
}

}  // namespace shardwise
