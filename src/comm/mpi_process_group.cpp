// MPI backend. Each group owns a duplicated (or split) communicator and an OrderedWorker thread.
// Collectives run on that thread in issue order as non-blocking MPI calls completed by polling
// under the group's comm_timeout (the watchdog, mpi_wait.hpp); send/recv are posted in order on
// the same thread as non-blocking requests (so a symmetric exchange cannot deadlock the queue) and
// completed by Work::wait, also under the deadline. Communicators use MPI_ERRORS_RETURN so MPI
// failures become CommErrors rethrown by wait() instead of aborting in the library.
//
// reduce_scatter and all_gather of shards from kP2PMinShardBytes up run through the group's
// shared-memory segment (shared_memory_collectives.hpp, set up on first use) or over send/recv on
// a second communicator (direct_collectives.hpp, ring_collectives.hpp; ProcessGroupOptions picks),
// smaller ones and the other collectives through MPI's non-blocking collectives; all_reduce from
// kP2PMinShardBytes up also goes through the segment when there is one.
//
// Reductions: fp32 natively; int32/int64 with SUM or MAX; bf16 and fp16 through an fp32 staging
// buffer (see fp32_accumulation.hpp: accumulate in fp32, round once). AVG is an fp32 SUM divided
// by the group size. MPI counts are int: all_reduce and broadcast are issued in chunks of 2^30
// elements and have no size limit; a reduce_scatter / all_gather shard, an all_gather_v count or
// displacement, and a send/recv message must hold at most INT_MAX elements (InvalidArgument
// otherwise). check_same_on_all_ranks and communicator splits are not counted as traffic.
#include "shardwise/comm/mpi_process_group.hpp"

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "direct_collectives.hpp"
#include "mpi_p2p_work.hpp"
#include "mpi_wait.hpp"
#include "ring_collectives.hpp"
#include "shardwise/comm/fp32_accumulation.hpp"
#include "shardwise/comm/ordered_worker.hpp"
#include "shardwise/comm/traffic_model.hpp"
#include "shardwise/core/logging.hpp"
#include "shardwise/core/streaming_copy.hpp"
#include "shared_memory_collectives.hpp"

namespace shardwise {

namespace {

constexpr std::int64_t kMaxChunk = std::int64_t{1} << 30;  // elements per MPI call when chunking

MPI_Op mpi_op(ReduceOp op) { return op == ReduceOp::kMax ? MPI_MAX : MPI_SUM; }

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

class MpiProcessGroup final : public ProcessGroup {
 public:
  // Takes ownership of `comm`.
  MpiProcessGroup(MPI_Comm comm, std::string name, const ProcessGroupOptions& options)
      : comm_(comm), name_(std::move(name)) {
    set_options(options);
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    int* tag_ub = nullptr;
    int flag = 0;
    MPI_Comm_get_attr(comm_, MPI_TAG_UB, &tag_ub, &flag);
    tag_ub_ = flag && tag_ub ? *tag_ub : 32767;  // 32767: the least the standard guarantees
    world_ranks_ = world_ranks_of(comm_, size_);
    if (MPI_Comm_dup(comm_, &p2p_comm_) != MPI_SUCCESS) {
      throw CommError(
          str_cat("group ", name_,
                  ": MPI_Comm_dup of the point-to-point collectives' communicator failed"));
    }
    MPI_Comm_set_errhandler(p2p_comm_, MPI_ERRORS_RETURN);
    worker_ = std::make_unique<OrderedWorker>(name_);
  }

  ~MpiProcessGroup() override {
    worker_.reset();  // lets the running operation finish, drops the queued ones, joins
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) {
      MPI_Comm_free(&p2p_comm_);
      MPI_Comm_free(&comm_);
    }
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return name_; }

  void set_options(const ProcessGroupOptions& options) {
    validate_comm_timeout(options.comm_timeout_seconds, str_cat("group ", name_, " comm_timeout"));
    timeout_seconds_ = options.comm_timeout_seconds;
    algorithm_ = static_cast<int>(options.collective_algorithm);
  }
  ProcessGroupOptions options() const {
    return ProcessGroupOptions{timeout_seconds_.load(),
                               static_cast<CollectiveAlgorithm>(algorithm_.load())};
  }

  WorkPtr all_reduce(TensorView buffer, ReduceOp op) override {
    try {
      require_view(buffer, "all_reduce", "buffer");
      require_reducible(buffer.dtype, op, "all_reduce");
    } catch (...) {
      return finished_work(std::current_exception());
    }
    return run_op("all_reduce", CollectiveKind::kAllReduce, [this, buffer, op] {
      const int divisor = op == ReduceOp::kAvg ? size_ : 1;
      if (reduces_through_fp32(buffer.dtype)) {
        float* staged = scratch_floats(buffer.numel);
        widen_to_fp32(buffer, staged);
        all_reduce_any(staged, buffer.numel, DType::kFloat32, op);
        narrow_from_fp32(staged, buffer, divisor);
      } else {
        all_reduce_any(buffer.data, buffer.numel, buffer.dtype, op);
        if (divisor != 1) divide_fp32(buffer, divisor);
      }
      return all_reduce_traffic(static_cast<std::int64_t>(buffer.nbytes()), size_);
    });
  }

  WorkPtr reduce_scatter(TensorView output, TensorView input, ReduceOp op) override {
    bool in_place = false;
    try {
      in_place = check_reduce_scatter(output, input, op);
    } catch (...) {
      return finished_work(std::current_exception());
    }
    return run_op("reduce_scatter", CollectiveKind::kReduceScatter,
                  [this, output, input, op, in_place] {
                    run_reduce_scatter(output, input, op, in_place, 1.0f);
                    return reduce_scatter_traffic(static_cast<std::int64_t>(input.nbytes()), size_);
                  });
  }

  // Folds the scaling into the shared-memory reduction; other paths scale the input in place
  // first (on the worker, not the caller's thread).
  WorkPtr reduce_scatter_scaled(TensorView output, TensorView input, double input_scale) override {
    bool in_place = false;
    try {
      SW_REQUIRE(input.dtype == DType::kFloat32, InvalidArgument, where("reduce_scatter_scaled"),
                 ": input is ", dtype_name(input.dtype), ", expected fp32");
      in_place = check_reduce_scatter(output, input, ReduceOp::kSum);
    } catch (...) {
      return finished_work(std::current_exception());
    }
    const float scale = static_cast<float>(input_scale);
    return run_op("reduce_scatter", CollectiveKind::kReduceScatter,
                  [this, output, input, in_place, scale] {
                    run_reduce_scatter(output, input, ReduceOp::kSum, in_place, scale);
                    return reduce_scatter_traffic(static_cast<std::int64_t>(input.nbytes()), size_);
                  });
  }

  WorkPtr all_gather(TensorView output, TensorView input) override {
    bool in_place = false;
    try {
      require_view(output, "all_gather", "output");
      require_view(input, "all_gather", "input");
      require_same_dtype(output, input, "all_gather");
      SW_REQUIRE(output.numel == input.numel * size_, InvalidArgument, where("all_gather"),
                 ": output has ", output.numel, " elements, expected ", size_,
                 " shards of the input's ", input.numel);
      require_int_count(input.numel, "all_gather", "shard");
      in_place =
          aliases_own_shard(input, output, rank_ * input.numel, "all_gather", "input", "output");
    } catch (...) {
      return finished_work(std::current_exception());
    }
    return run_op("all_gather", CollectiveKind::kAllGather, [this, output, input, in_place] {
      const int n = static_cast<int>(input.numel);
      const MPI_Datatype type = mpi_type(input.dtype);
      const CollectiveAlgorithm algorithm = algorithm_for(input.nbytes());
      const auto* own_input = static_cast<const std::byte*>(input.data);
      auto* bytes = static_cast<std::byte*>(output.data);
      if (algorithm == CollectiveAlgorithm::kSharedMemory) {
        // The segment path copies this rank's shard to its place itself (from cache).
        shm_->all_gather(bytes, in_place ? nullptr : own_input, input.nbytes(), shm_watch());
      } else if (algorithm != CollectiveAlgorithm::kMpi) {
        if (!in_place) {
          auto* own = static_cast<std::byte*>(output.slice(rank_ * input.numel, input.numel).data);
          copy_into_output(own, own_input, input.nbytes(), output.nbytes());
        }
        if (algorithm == CollectiveAlgorithm::kRing) {
          ring_all_gather(p2p_links(), bytes, input.nbytes());
        } else {
          direct_all_gather(p2p_links(), bytes, input.nbytes());
        }
      } else {
        complete("MPI_Iallgather", [&](MPI_Request* r) {
          return in_place ? MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, output.data, n, type,
                                           comm_, r)
                          : MPI_Iallgather(input.data, n, type, output.data, n, type, comm_, r);
        });
      }
      return all_gather_traffic(static_cast<std::int64_t>(output.nbytes()), size_);
    });
  }

  WorkPtr all_gather_v(TensorView output, TensorView input,
                       const std::vector<std::int64_t>& counts) override {
    std::vector<int> icounts(static_cast<std::size_t>(size_));
    std::vector<int> displs(static_cast<std::size_t>(size_));
    bool in_place = false;
    try {
      require_view(output, "all_gather_v", "output");
      require_view(input, "all_gather_v", "input");
      require_same_dtype(output, input, "all_gather_v");
      SW_REQUIRE(counts.size() == static_cast<std::size_t>(size_), InvalidArgument,
                 where("all_gather_v"), ": ", counts.size(), " counts for ", size_, " ranks");
      std::int64_t total = 0;
      for (int r = 0; r < size_; ++r) {
        const std::int64_t c = counts[static_cast<std::size_t>(r)];
        SW_REQUIRE(c >= 0, InvalidArgument, where("all_gather_v"), ": count of rank ", r, " is ",
                   c);
        require_int_count(total, "all_gather_v", "displacement");
        require_int_count(c, "all_gather_v", "count");
        icounts[static_cast<std::size_t>(r)] = static_cast<int>(c);
        displs[static_cast<std::size_t>(r)] = static_cast<int>(total);
        total += c;
      }
      SW_REQUIRE(input.numel == counts[static_cast<std::size_t>(rank_)], InvalidArgument,
                 where("all_gather_v"), ": input has ", input.numel, " elements but counts[", rank_,
                 "] is ", counts[static_cast<std::size_t>(rank_)]);
      SW_REQUIRE(output.numel == total, InvalidArgument, where("all_gather_v"), ": output has ",
                 output.numel, " elements but the counts add up to ", total);
      in_place = aliases_own_shard(input, output, displs[static_cast<std::size_t>(rank_)],
                                   "all_gather_v", "input", "output");
    } catch (...) {
      return finished_work(std::current_exception());
    }
    return run_op(
        "all_gather_v", CollectiveKind::kAllGatherV,
        [this, output, input, icounts = std::move(icounts), displs = std::move(displs), in_place] {
          const MPI_Datatype type = mpi_type(input.dtype);
          complete("MPI_Iallgatherv", [&](MPI_Request* r) {
            return in_place ? MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, output.data,
                                              icounts.data(), displs.data(), type, comm_, r)
                            : MPI_Iallgatherv(input.data, static_cast<int>(input.numel), type,
                                              output.data, icounts.data(), displs.data(), type,
                                              comm_, r);
          });
          return all_gather_v_traffic(static_cast<std::int64_t>(input.nbytes()),
                                      static_cast<std::int64_t>(output.nbytes()), size_);
        });
  }

  WorkPtr broadcast(TensorView buffer, int root) override {
    try {
      require_view(buffer, "broadcast", "buffer");
      require_rank(root, "broadcast", "root");
    } catch (...) {
      return finished_work(std::current_exception());
    }
    return run_op("broadcast", CollectiveKind::kBroadcast, [this, buffer, root] {
      const MPI_Datatype type = mpi_type(buffer.dtype);
      auto* data = static_cast<std::byte*>(buffer.data);
      for (std::int64_t offset = 0; offset < buffer.numel; offset += kMaxChunk) {
        const std::int64_t n = std::min(kMaxChunk, buffer.numel - offset);
        complete("MPI_Ibcast", [&](MPI_Request* r) {
          return MPI_Ibcast(data + offset * static_cast<std::int64_t>(dtype_size(buffer.dtype)),
                            static_cast<int>(n), type, root, comm_, r);
        });
      }
      return broadcast_traffic(static_cast<std::int64_t>(buffer.nbytes()), size_, rank_, root);
    });
  }

  WorkPtr send(TensorView buffer, int peer, int tag) override {
    return point_to_point(CollectiveKind::kSend, buffer, peer, tag);
  }
  WorkPtr recv(TensorView buffer, int peer, int tag) override {
    return point_to_point(CollectiveKind::kRecv, buffer, peer, tag);
  }

  WorkPtr barrier() override {
    return run_op("barrier", CollectiveKind::kBarrier, [this] {
      complete("MPI_Ibarrier", [&](MPI_Request* r) { return MPI_Ibarrier(comm_, r); });
      return TrafficVolume{};
    });
  }

  void check_same_on_all_ranks(std::uint64_t value, const std::string& what) override {
    std::vector<std::uint64_t> values(static_cast<std::size_t>(size_));
    worker_
        ->submit([&] {
          begin_op("check_same_on_all_ranks");
          complete("MPI_Iallgather (check_same_on_all_ranks)", [&](MPI_Request* r) {
            return MPI_Iallgather(&value, 1, MPI_UINT64_T, values.data(), 1, MPI_UINT64_T, comm_,
                                  r);
          });
        })
        ->wait();
    // Ranks holding each value; the most common value (lowest rank on ties) is the reference.
    std::map<std::uint64_t, std::vector<int>> holders;
    for (int r = 0; r < size_; ++r) holders[values[static_cast<std::size_t>(r)]].push_back(r);
    if (holders.size() == 1) return;
    std::uint64_t reference = values[0];
    for (const auto& [v, ranks] : holders) {
      const auto& best = holders[reference];
      if (ranks.size() > best.size() || (ranks.size() == best.size() && ranks[0] < best[0])) {
        reference = v;
      }
    }
    std::string disagreeing;
    std::string detail;
    for (int r = 0; r < size_; ++r) {
      if (values[static_cast<std::size_t>(r)] != reference) {
        disagreeing += str_cat(disagreeing.empty() ? "" : ",", r);
      }
    }
    for (const auto& [v, ranks] : holders) {
      std::string list;
      for (int r : ranks) list += str_cat(list.empty() ? "" : ",", r);
      detail += str_cat(detail.empty() ? "" : "; ", ranks.size() == 1 ? "rank " : "ranks ", list,
                        ranks.size() == 1 ? " has " : " have ", v);
    }
    throw CommError(str_cat("ranks of group ", name_, " disagree on ", what,
                            ": disagreeing rank(s) ", disagreeing, " (", detail, ")"));
  }

  TrafficCounters traffic() const override { return traffic_->snapshot(); }
  void reset_traffic() override { traffic_->reset(); }

  // Collective over this group, queued behind its pending operations.
  ProcessGroupPtr split(int color, int key, const std::string& name) {
    MPI_Comm child = MPI_COMM_NULL;
    worker_
        ->submit([&] {
          // MPI_Comm_split blocks with no deadline: meet in a watched barrier first, so a rank
          // that never arrives is reported instead of hanging the split.
          begin_op("split");
          complete("MPI_Ibarrier (before MPI_Comm_split)",
                   [&](MPI_Request* r) { return MPI_Ibarrier(comm_, r); });
          check(MPI_Comm_split(comm_, color < 0 ? MPI_UNDEFINED : color, key, &child),
                "MPI_Comm_split");
        })
        ->wait();
    if (child == MPI_COMM_NULL) return nullptr;
    return std::make_shared<MpiProcessGroup>(child, name, options());
  }

 private:
  std::string where(const char* op) const {
    return str_cat(op, " on group ", name_, " (rank ", rank_, " of ", size_, ")");
  }

  void check(int rc, const char* call) const {
    if (rc != MPI_SUCCESS) {
      throw CommError(
          str_cat(call, " failed on rank ", rank_, " of group ", name_, ": ", mpi_error_text(rc)));
    }
  }

  void require_view(const TensorView& v, const char* op, const char* role) const {
    SW_REQUIRE(v.numel >= 0, InvalidArgument, where(op), ": ", role, " has ", v.numel, " elements");
    SW_REQUIRE(v.numel == 0 || v.data != nullptr, InvalidArgument, where(op), ": ", role, " of ",
               v.numel, " elements has no data");
  }

  void require_same_dtype(const TensorView& a, const TensorView& b, const char* op) const {
    SW_REQUIRE(a.dtype == b.dtype, InvalidArgument, where(op), ": output is ", dtype_name(a.dtype),
               " but input is ", dtype_name(b.dtype));
  }

  void require_reducible(DType dtype, ReduceOp op, const char* what) const {
    const bool floating =
        dtype == DType::kFloat32 || dtype == DType::kBFloat16 || dtype == DType::kFloat16;
    const bool integer = dtype == DType::kInt32 || dtype == DType::kInt64;
    SW_REQUIRE(floating || (integer && op != ReduceOp::kAvg), InvalidArgument, where(what),
               ": cannot reduce ", dtype_name(dtype), " with ", reduce_op_name(op),
               " (reductions take fp32, bf16 or fp16 with SUM/AVG/MAX, int32 or int64 with "
               "SUM/MAX)");
  }

  void require_int_count(std::int64_t n, const char* op, const char* what) const {
    SW_REQUIRE(n <= INT_MAX, InvalidArgument, where(op), ": ", what, " of ", n,
               " elements exceeds the MPI count limit ", INT_MAX);
  }

  void require_rank(int r, const char* op, const char* role) const {
    SW_REQUIRE(r >= 0 && r < size_, InvalidArgument, where(op), ": ", role, " ", r,
               " is not a rank of the group");
  }

  // True when `part` is exactly elements [offset, offset + part.numel) of `whole` (the in-place
  // form); false when they do not overlap; throws when they overlap any other way.
  bool aliases_own_shard(const TensorView& part, const TensorView& whole, std::int64_t offset,
                         const char* op, const char* part_role, const char* whole_role) const {
    if (!byte_ranges_overlap(part, whole)) return false;
    const TensorView own = whole.slice(offset, part.numel);
    SW_REQUIRE(own.data == part.data, InvalidArgument, where(op), ": ", part_role, " overlaps ",
               whole_role, " but is not this rank's shard of it (elements [", offset, ", ",
               offset + part.numel, "))");
    return true;
  }

  void all_reduce_chunks(void* data, std::int64_t numel, MPI_Datatype type, MPI_Op op,
                         std::size_t elem_size) {
    auto* bytes = static_cast<std::byte*>(data);
    for (std::int64_t offset = 0; offset < numel; offset += kMaxChunk) {
      const std::int64_t n = std::min(kMaxChunk, numel - offset);
      complete("MPI_Iallreduce", [&](MPI_Request* r) {
        return MPI_Iallreduce(MPI_IN_PLACE, bytes + static_cast<std::size_t>(offset) * elem_size,
                              static_cast<int>(n), type, op, comm_, r);
      });
    }
  }

  // The algorithm of a reduce_scatter / all_gather of shards of `shard_bytes` (worker thread;
  // the same on every rank, so the segment's collective set-up happens at the same point).
  CollectiveAlgorithm algorithm_for(std::size_t shard_bytes) {
    const auto chosen = static_cast<CollectiveAlgorithm>(algorithm_.load());
    if (size_ < 2) return CollectiveAlgorithm::kMpi;
    if (chosen == CollectiveAlgorithm::kAuto && shard_bytes < kP2PMinShardBytes) {
      return CollectiveAlgorithm::kMpi;
    }
    if (chosen == CollectiveAlgorithm::kAuto || chosen == CollectiveAlgorithm::kSharedMemory) {
      return shared_memory() ? CollectiveAlgorithm::kSharedMemory : CollectiveAlgorithm::kDirect;
    }
    return chosen;
  }

  // Worker thread: the group's segment, set up (collectively) the first time it is asked for.
  bool shared_memory() {
    if (!shm_tried_) {
      shm_tried_ = true;
      shm_ = SharedMemoryCollectives::create(
          p2p_comm_, name_, [this](const char* call, const std::function<int(MPI_Request*)>& post) {
            complete(call, post);
          });
    }
    return shm_ != nullptr;
  }

  SharedMemoryWatch shm_watch() {
    return SharedMemoryWatch{timeout_seconds_.load(),
                             [this](int peer) { return describe(current_op_, sequence_, peer); }};
  }

 public:
  bool uses_shared_memory() {
    bool active = false;
    worker_->submit([&] { active = shm_ != nullptr; })->wait();
    return active;
  }

 private:
  // Validates a reduce_scatter's arguments; returns whether it is in place.
  bool check_reduce_scatter(const TensorView& output, const TensorView& input, ReduceOp op) const {
    require_view(output, "reduce_scatter", "output");
    require_view(input, "reduce_scatter", "input");
    require_same_dtype(output, input, "reduce_scatter");
    require_reducible(input.dtype, op, "reduce_scatter");
    SW_REQUIRE(input.numel == output.numel * size_, InvalidArgument, where("reduce_scatter"),
               ": input has ", input.numel, " elements, expected ", size_,
               " shards of the output's ", output.numel);
    require_int_count(output.numel, "reduce_scatter", "shard");
    return aliases_own_shard(output, input, rank_ * output.numel, "reduce_scatter", "output",
                             "input");
  }

  // Worker thread: the body of reduce_scatter; `scale` (fp32 SUM only) multiplies every input.
  void run_reduce_scatter(TensorView output, TensorView input, ReduceOp op, bool in_place,
                          float scale) {
    const int divisor = op == ReduceOp::kAvg ? size_ : 1;
    if (scale != 1.0f && algorithm_for(output.nbytes()) != CollectiveAlgorithm::kSharedMemory) {
      float* data = input.as<float>();  // as the default reduce_scatter_scaled does
      for (std::int64_t i = 0; i < input.numel; ++i) data[i] *= scale;
      scale = 1.0f;
    }
    if (reduces_through_fp32(input.dtype)) {
      float* staged = scratch_floats(input.numel);
      widen_to_fp32(input, staged);
      narrow_from_fp32(reduce_scatter_staged(staged, output.numel, op), output, divisor);
    } else if (algorithm_for(output.nbytes()) != CollectiveAlgorithm::kMpi) {
      p2p_reduce_scatter(static_cast<const std::byte*>(input.data),
                         static_cast<std::byte*>(output.data), output.nbytes(), input.dtype, op,
                         scale);
    } else {
      mpi_reduce_scatter(output, input, op, in_place);
    }
    if (!reduces_through_fp32(input.dtype) && divisor != 1) divide_fp32(output, divisor);
  }

  // all_reduce in place: through the segment from kP2PMinShardBytes up (kAuto, kSharedMemory),
  // else MPI's.
  void all_reduce_any(void* data, std::int64_t numel, DType dtype, ReduceOp op) {
    const auto chosen = static_cast<CollectiveAlgorithm>(algorithm_.load());
    const std::size_t elem = dtype_size(dtype);
    const std::size_t bytes = static_cast<std::size_t>(numel) * elem;
    const bool eligible = chosen == CollectiveAlgorithm::kSharedMemory ||
                          (chosen == CollectiveAlgorithm::kAuto && bytes >= kP2PMinShardBytes);
    if (size_ >= 2 && eligible && shared_memory()) {
      shm_->all_reduce(static_cast<std::byte*>(data), static_cast<std::size_t>(numel), elem,
                       element_combine(dtype, op), shm_watch());
      return;
    }
    all_reduce_chunks(data, numel, mpi_type(dtype), mpi_op(op), elem);
  }

  // Shared-memory, ring or direct reduce-scatter (algorithm_for decides) of a dtype the p2p
  // paths reduce; `scale` != 1 only on the shared-memory path.
  void p2p_reduce_scatter(const std::byte* input, std::byte* output, std::size_t shard_bytes,
                          DType dtype, ReduceOp op, float scale = 1.0f) {
    const CollectiveAlgorithm algorithm = algorithm_for(shard_bytes);
    if (algorithm == CollectiveAlgorithm::kSharedMemory) {
      shm_->reduce_scatter(input, output, shard_bytes, dtype_size(dtype),
                           element_combine(dtype, op), scale, shm_watch());
    } else if (algorithm == CollectiveAlgorithm::kRing) {
      ring_reduce_scatter(p2p_links(), input, output, shard_bytes, dtype_size(dtype),
                          element_combine(dtype, op), p2p_scratch_);
    } else {
      direct_reduce_scatter(p2p_links(), input, output, shard_bytes, dtype_size(dtype),
                            element_combine(dtype, op), p2p_scratch_);
    }
  }

  PeerLinks p2p_links() {
    return PeerLinks{
        p2p_comm_, rank_, size_,
        [this](int count, MPI_Request* requests, int peer) {
          check(wait_all_or_abort(count, requests, MPI_STATUSES_IGNORE, timeout_seconds_.load(),
                                  [&] { return describe(current_op_, sequence_, peer); }),
                "ring exchange");
        },
        [this](int rc, const char* call) { check(rc, call); }};
  }

  // Reduce-scatter of the fp32 copy of a 16-bit input (clobbered); returns this rank's reduced
  // shard inside it.
  float* reduce_scatter_staged(float* staged, std::int64_t shard, ReduceOp op) {
    const std::size_t shard_bytes = static_cast<std::size_t>(shard) * sizeof(float);
    if (algorithm_for(shard_bytes) != CollectiveAlgorithm::kMpi) {
      auto* bytes = reinterpret_cast<std::byte*>(staged);
      p2p_reduce_scatter(bytes, bytes + static_cast<std::size_t>(rank_) * shard_bytes, shard_bytes,
                         DType::kFloat32, op);
      return staged + rank_ * shard;
    }
    // MPI leaves this rank's reduced shard at the start of the buffer.
    complete("MPI_Ireduce_scatter_block", [&](MPI_Request* r) {
      return MPI_Ireduce_scatter_block(MPI_IN_PLACE, staged, static_cast<int>(shard), MPI_FLOAT,
                                       mpi_op(op), comm_, r);
    });
    return staged;
  }

  void mpi_reduce_scatter(TensorView output, TensorView input, ReduceOp op, bool in_place) {
    const int n = static_cast<int>(output.numel);
    if (in_place) {
      // MPI_IN_PLACE would leave the result at the start of `input` (rank 0's shard) on every
      // rank and may clobber the other shards, so reduce into a shard-sized stage instead.
      void* staged = scratch_bytes(output.nbytes());
      complete("MPI_Ireduce_scatter_block", [&](MPI_Request* r) {
        return MPI_Ireduce_scatter_block(input.data, staged, n, mpi_type(input.dtype), mpi_op(op),
                                         comm_, r);
      });
      std::memcpy(output.data, staged, output.nbytes());
    } else {
      complete("MPI_Ireduce_scatter_block", [&](MPI_Request* r) {
        return MPI_Ireduce_scatter_block(input.data, output.data, n, mpi_type(input.dtype),
                                         mpi_op(op), comm_, r);
      });
    }
  }

  WorkPtr point_to_point(CollectiveKind kind, TensorView buffer, int peer, int tag) {
    const char* op = kind == CollectiveKind::kSend ? "send" : "recv";
    try {
      require_view(buffer, op, "buffer");
      require_rank(peer, op, "peer");
      SW_REQUIRE(tag >= 0 && tag <= tag_ub_, InvalidArgument, where(op), ": tag ", tag,
                 " outside [0, ", tag_ub_, "]");
      require_int_count(buffer.numel, op, "message");
    } catch (...) {
      return finished_work(std::current_exception());
    }
    auto work = std::make_shared<P2PWork>(
        kind, buffer,
        str_cat(where(op), kind == CollectiveKind::kSend ? " to rank " : " from rank ", peer,
                " tag ", tag),
        describe(op, 0, peer), timeout_seconds_.load(), traffic_);
    worker_->post(
        [this, work, kind, buffer, peer, tag] {
          MPI_Request request = MPI_REQUEST_NULL;
          const int n = static_cast<int>(buffer.numel);
          const int rc =
              kind == CollectiveKind::kSend
                  ? MPI_Isend(buffer.data, n, mpi_type(buffer.dtype), peer, tag, comm_, &request)
                  : MPI_Irecv(buffer.data, n, mpi_type(buffer.dtype), peer, tag, comm_, &request);
          if (rc == MPI_SUCCESS) {
            work->posted(request, ++sequence_);
          } else {
            work->failed(std::make_exception_ptr(CommError(str_cat(
                kind == CollectiveKind::kSend ? "MPI_Isend" : "MPI_Irecv", " failed on rank ",
                rank_, " of group ", name_, ": ", mpi_error_text(rc)))));
          }
        },
        [work](std::exception_ptr error) { work->failed(std::move(error)); });
    return work;
  }

  // Queues a collective: on the worker it is numbered, timed, and its traffic (what `body`
  // returns) recorded with the time it ran.
  WorkPtr run_op(const char* op, CollectiveKind kind, std::function<TrafficVolume()> body) {
    return worker_->submit([this, op, kind, body = std::move(body)] {
      begin_op(op);
      const auto start = std::chrono::steady_clock::now();
      const TrafficVolume volume = body();
      traffic_->record(
          kind, volume,
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    });
  }

  // Worker thread: the operation now running, named in the watchdog's message.
  void begin_op(const char* op) {
    current_op_ = op;
    ++sequence_;
  }

  CommWaitDescription describe(const char* op, std::uint64_t sequence, int peer) const {
    return CommWaitDescription{op, name_, rank_, world_ranks_, sequence, peer};
  }

  // Worker thread: posts one non-blocking MPI call (`post` fills the request) and completes it
  // under the watchdog's deadline; MPI errors become CommErrors naming `call`.
  template <class Post>
  void complete(const char* call, Post&& post) {
    MPI_Request request = MPI_REQUEST_NULL;
    check(post(&request), call);
    MPI_Status status;
    check(wait_all_or_abort(1, &request, &status, timeout_seconds_.load(),
                            [this] { return describe(current_op_, sequence_, -1); }),
          call);
  }

  static std::vector<int> world_ranks_of(MPI_Comm comm, int size) {
    MPI_Group group = MPI_GROUP_NULL;
    MPI_Group world = MPI_GROUP_NULL;
    MPI_Comm_group(comm, &group);
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    std::vector<int> ranks(static_cast<std::size_t>(size));
    std::vector<int> out(static_cast<std::size_t>(size), -1);
    for (int r = 0; r < size; ++r) ranks[static_cast<std::size_t>(r)] = r;
    MPI_Group_translate_ranks(group, size, ranks.data(), world, out.data());
    MPI_Group_free(&group);
    MPI_Group_free(&world);
    return out;
  }

  // Worker-thread scratch, grown on demand and reused across operations.
  void* scratch_bytes(std::size_t bytes) {
    const std::size_t words = (bytes + sizeof(double) - 1) / sizeof(double);
    if (scratch_.size() < words) scratch_.resize(words);
    return scratch_.data();
  }
  float* scratch_floats(std::int64_t n) {
    return static_cast<float*>(scratch_bytes(static_cast<std::size_t>(n) * sizeof(float)));
  }

  MPI_Comm comm_;
  std::string name_;
  int rank_ = 0;
  int size_ = 1;
  int tag_ub_ = 32767;
  std::vector<int> world_ranks_;  // world rank of each rank of this group
  std::atomic<double> timeout_seconds_{kDefaultCommTimeoutSeconds};
  const char* current_op_ = "";  // worker thread only, like sequence_
  std::uint64_t sequence_ = 0;   // operations this group has run (posted, for send/recv)
  std::shared_ptr<TrafficRecorder> traffic_ = std::make_shared<TrafficRecorder>();
  std::vector<double> scratch_;         // touched by the worker thread only
  std::vector<std::byte> p2p_scratch_;  // likewise: received shards of ring / direct collectives
  MPI_Comm p2p_comm_ = MPI_COMM_NULL;   // a duplicate reserved for their messages
  std::atomic<int> algorithm_{static_cast<int>(CollectiveAlgorithm::kAuto)};
  std::unique_ptr<SharedMemoryCollectives> shm_;  // worker thread only; null: none (yet)
  bool shm_tried_ = false;                        // whether shared_memory() set it up already
  std::unique_ptr<OrderedWorker> worker_;
};

// The world group and whether shardwise initialised MPI (and so finalises it).
struct WorldState {
  std::mutex mutex;
  ProcessGroupPtr world;
  bool owns_mpi = false;
};

WorldState& world_state() {
  static WorldState state;
  return state;
}

void finalize_owned_mpi() {
  WorldState& state = world_state();
  std::lock_guard<std::mutex> lock(state.mutex);
  state.world.reset();  // frees its communicator while MPI is still up (unless others hold it)
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

const char* thread_level_name(int level) {
  if (level == MPI_THREAD_SINGLE) return "MPI_THREAD_SINGLE";
  if (level == MPI_THREAD_FUNNELED) return "MPI_THREAD_FUNNELED";
  if (level == MPI_THREAD_SERIALIZED) return "MPI_THREAD_SERIALIZED";
  if (level == MPI_THREAD_MULTIPLE) return "MPI_THREAD_MULTIPLE";
  return "unknown";
}

// World size if MPI is up, else 1.
int live_world_size() {
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) return 1;
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

}  // namespace

ProcessGroupPtr init_mpi_world() {
  WorldState& state = world_state();
  std::lock_guard<std::mutex> lock(state.mutex);
  if (state.world) return state.world;
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  SW_REQUIRE(!finalized, CommError, "init_mpi_world: MPI was already finalised");
  int provided = 0;
  if (!initialized) {
    // Without mpirun, Open MPI starts a singleton: a world of size 1.
    if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
      throw CommError("init_mpi_world: MPI_Init_thread failed");
    }
    state.owns_mpi = true;
    std::atexit(finalize_owned_mpi);
  } else {
    MPI_Query_thread(&provided);
  }
  SW_REQUIRE(provided >= MPI_THREAD_MULTIPLE, CommError, "init_mpi_world: MPI provides ",
             thread_level_name(provided),
             " but shardwise runs collectives on worker threads and needs MPI_THREAD_MULTIPLE "
             "(initialise MPI with MPI_Init_thread(..., MPI_THREAD_MULTIPLE, ...))");
  MPI_Comm comm = MPI_COMM_NULL;
  if (MPI_Comm_dup(MPI_COMM_WORLD, &comm) != MPI_SUCCESS) {
    throw CommError("init_mpi_world: MPI_Comm_dup of MPI_COMM_WORLD failed");
  }
  state.world = std::make_shared<MpiProcessGroup>(comm, "world", ProcessGroupOptions{});
  log::set_rank(state.world->rank(), state.world->size());
  return state.world;
}

ProcessGroupPtr init_mpi_world(const ProcessGroupOptions& options) {
  ProcessGroupPtr world = init_mpi_world();
  set_process_group_options(world, options);
  return world;
}

namespace {
MpiProcessGroup& as_mpi_group(const ProcessGroupPtr& group, const char* caller) {
  auto* mpi = dynamic_cast<MpiProcessGroup*>(group.get());
  SW_REQUIRE(mpi != nullptr, InvalidArgument, caller, ": group ",
             group ? group->name() : std::string("(null)"), " is not an MPI group");
  return *mpi;
}
}  // namespace

void set_process_group_options(const ProcessGroupPtr& group, const ProcessGroupOptions& options) {
  as_mpi_group(group, "set_process_group_options").set_options(options);
}

ProcessGroupOptions process_group_options(const ProcessGroupPtr& group) {
  return as_mpi_group(group, "process_group_options").options();
}

bool uses_shared_memory_collectives(const ProcessGroupPtr& group) {
  return as_mpi_group(group, "uses_shared_memory_collectives").uses_shared_memory();
}

ProcessGroupPtr split_group(const ProcessGroupPtr& parent, int color, int key,
                            const std::string& name) {
  auto* mpi_parent = dynamic_cast<MpiProcessGroup*>(parent.get());
  SW_REQUIRE(mpi_parent != nullptr, InvalidArgument, "split_group(", name, "): parent group ",
             parent ? parent->name() : std::string("(null)"), " is not an MPI group");
  return mpi_parent->split(color, key, name);
}

void abort_world(const std::string& message, int exit_code) {
  log::error(message);
  const int world = live_world_size();
  if (world > 1) {
    log::error("aborting all ", world, " ranks (exit code ", exit_code, ")");
    MPI_Abort(MPI_COMM_WORLD, exit_code);
  }
  std::_Exit(exit_code);
}

int run_rank_main(const std::function<int()>& rank_main) {
  std::string message;
  try {
    return rank_main();
  } catch (const std::exception& e) {
    message = e.what();
  } catch (...) {
    message = "unknown exception";
  }
  if (live_world_size() > 1) abort_world(message, 2);
  log::error(message);
  return 2;
}

}  // namespace shardwise
