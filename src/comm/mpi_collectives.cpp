#include "mpi_collectives.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

#include "mpi_wait.hpp"

namespace shardwise {

namespace {

// Elements per MPI call when chunking: MPI counts are int.
constexpr std::int64_t kMaxElementsPerCall = std::int64_t{1} << 30;

MPI_Op mpi_reduce_op(ReduceOp op) { return op == ReduceOp::kMax ? MPI_MAX : MPI_SUM; }

int element_count(std::size_t bytes, DType dtype) {
  return static_cast<int>(bytes / dtype_size(dtype));
}

class MpiCollectives final : public CollectiveImplementation {
 public:
  using CollectiveImplementation::CollectiveImplementation;

  void reduce_scatter(const ReduceScatterCall& call) override {
    const int n = element_count(call.shard_bytes, call.dtype);
    const MPI_Datatype type = mpi_type(call.dtype);
    std::byte* result = call.output;
    // MPI_IN_PLACE would leave the result at the start of the input (rank 0's shard) on every
    // rank and may clobber the other shards, so an in-place call reduces into a stage instead.
    if (call.in_place) result = stage(call.shard_bytes);
    context().complete("MPI_Ireduce_scatter_block", [&](MPI_Request* r) {
      return MPI_Ireduce_scatter_block(call.input, result, n, type, mpi_reduce_op(call.op),
                                       context().comm, r);
    });
    if (call.in_place) std::memcpy(call.output, result, call.shard_bytes);
  }

  // The stage is scratch already: reduce in place and leave the result where MPI puts it.
  float* reduce_scatter_staged(float* data, std::int64_t shard, ReduceOp op) override {
    context().complete("MPI_Ireduce_scatter_block", [&](MPI_Request* r) {
      return MPI_Ireduce_scatter_block(MPI_IN_PLACE, data, static_cast<int>(shard), MPI_FLOAT,
                                       mpi_reduce_op(op), context().comm, r);
    });
    return data;
  }

  void all_gather(std::byte* output, const std::byte* own_input, std::size_t shard_bytes,
                  DType dtype) override {
    const int n = element_count(shard_bytes, dtype);
    const MPI_Datatype type = mpi_type(dtype);
    context().complete("MPI_Iallgather", [&](MPI_Request* r) {
      return own_input == nullptr
                 ? MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, output, n, type,
                                  context().comm, r)
                 : MPI_Iallgather(own_input, n, type, output, n, type, context().comm, r);
    });
  }

  bool all_reduce(std::byte* data, std::int64_t numel, DType dtype, ReduceOp op) override {
    const std::size_t elem_size = dtype_size(dtype);
    for (std::int64_t offset = 0; offset < numel; offset += kMaxElementsPerCall) {
      const std::int64_t n = std::min(kMaxElementsPerCall, numel - offset);
      context().complete("MPI_Iallreduce", [&](MPI_Request* r) {
        return MPI_Iallreduce(MPI_IN_PLACE, data + static_cast<std::size_t>(offset) * elem_size,
                              static_cast<int>(n), mpi_type(dtype), mpi_reduce_op(op),
                              context().comm, r);
      });
    }
    return true;
  }

 private:
  // Grown on demand and reused across operations (worker thread only).
  std::byte* stage(std::size_t bytes) {
    const std::size_t words = (bytes + sizeof(double) - 1) / sizeof(double);
    if (stage_.size() < words) stage_.resize(words);
    return reinterpret_cast<std::byte*>(stage_.data());
  }

  std::vector<double> stage_;
};

}  // namespace

std::unique_ptr<CollectiveImplementation> make_mpi_collectives(const CollectiveContext& context) {
  return std::make_unique<MpiCollectives>(context);
}

}  // namespace shardwise
