// MPI backend. Each group owns a duplicated (or split) communicator and an OrderedWorker thread.
// Collectives run on that thread in issue order as non-blocking MPI calls completed by polling
// under the group's comm_timeout (the watchdog, mpi_wait.hpp); send/recv are posted in order on
// the same thread as non-blocking requests (so a symmetric exchange cannot deadlock the queue) and
// completed by Work::wait, also under the deadline. Communicators use MPI_ERRORS_RETURN so MPI
// failures become CommErrors rethrown by wait() instead of aborting in the library.
//
// reduce_scatter, all_gather and all_reduce run through one of the collective algorithms
// (collective_implementation.hpp; select_collective_algorithm picks per operation from the
// group's ProcessGroupOptions and the size, built on first use); the other collectives through
// MPI's non-blocking collectives.
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
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>

#include "collective_implementation.hpp"
#include "collective_selection.hpp"
#include "mpi_p2p_work.hpp"
#include "mpi_wait.hpp"
#include "rank_agreement.hpp"
#include "shardwise/comm/collective_arguments.hpp"
#include "shardwise/comm/fp32_accumulation.hpp"
#include "shardwise/comm/ordered_worker.hpp"
#include "shardwise/comm/symmetric_memory.hpp"
#include "shardwise/comm/traffic_model.hpp"
#include "shardwise/core/logging.hpp"

namespace shardwise {

namespace {

constexpr std::int64_t kMaxChunk = std::int64_t{1} << 30;  // elements per MPI call when chunking

class MpiProcessGroup final : public ProcessGroup {
 public:
  // Takes ownership of `comm`.
  MpiProcessGroup(MPI_Comm comm, std::string name, const ProcessGroupOptions& options)
      : comm_(comm), name_(std::move(name)) {
    set_options(options);
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    args_ = CollectiveArguments(name_, rank_, size_,
                                {.host_group_hint = " (wrap it in a HostStagedProcessGroup)"});
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
      args_.require_view(buffer, "all_reduce", "buffer");
      args_.require_reducible(buffer.dtype, op, "all_reduce");
    } catch (...) {
      return finished_work(std::current_exception());
    }
    return run_op("all_reduce", CollectiveKind::kAllReduce, [this, buffer, op] {
      const int divisor = op == ReduceOp::kAvg ? size_ : 1;
      if (reduces_through_fp32(buffer.dtype)) {
        float* staged = scratch_floats(buffer.numel);
        widen_to_fp32(buffer, staged);
        run_all_reduce(reinterpret_cast<std::byte*>(staged), buffer.numel, DType::kFloat32, op);
        narrow_from_fp32(staged, buffer, divisor);
      } else {
        run_all_reduce(static_cast<std::byte*>(buffer.data), buffer.numel, buffer.dtype, op);
        if (divisor != 1) divide_fp32(buffer, divisor);
      }
      return all_reduce_traffic(static_cast<std::int64_t>(buffer.nbytes()), size_);
    });
  }

  WorkPtr reduce_scatter(TensorView output, TensorView input, ReduceOp op) override {
    bool in_place = false;
    try {
      in_place = args_.reduce_scatter(output, input, op);
    } catch (...) {
      return finished_work(std::current_exception());
    }
    return run_op("reduce_scatter", CollectiveKind::kReduceScatter,
                  [this, output, input, op, in_place] {
                    run_reduce_scatter(output, input, op, in_place, 1.0f);
                    return reduce_scatter_traffic(static_cast<std::int64_t>(input.nbytes()), size_);
                  });
  }

  // An algorithm that folds_input_scale() scales inside its reduction; for the others the input
  // is scaled in place first (on the worker, not the caller's thread).
  WorkPtr reduce_scatter_scaled(TensorView output, TensorView input, double input_scale) override {
    bool in_place = false;
    try {
      SW_REQUIRE(input.dtype == DType::kFloat32, InvalidArgument,
                 args_.where("reduce_scatter_scaled"), ": input is ", dtype_name(input.dtype),
                 ", expected fp32");
      in_place = args_.reduce_scatter(output, input, ReduceOp::kSum);
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
      in_place = args_.all_gather(output, input);
    } catch (...) {
      return finished_work(std::current_exception());
    }
    return run_op("all_gather", CollectiveKind::kAllGather, [this, output, input, in_place] {
      const auto* own_input = static_cast<const std::byte*>(input.data);
      algorithm_for(input.nbytes())
          .all_gather(static_cast<std::byte*>(output.data), in_place ? nullptr : own_input,
                      input.nbytes(), input.dtype);
      return all_gather_traffic(static_cast<std::int64_t>(output.nbytes()), size_);
    });
  }

  WorkPtr all_gather_v(TensorView output, TensorView input,
                       const std::vector<std::int64_t>& counts) override {
    GatherCounts gather;
    bool in_place = false;
    try {
      in_place = args_.all_gather_v(output, input, counts, gather);
    } catch (...) {
      return finished_work(std::current_exception());
    }
    // MPI takes int counts: checked against INT_MAX (the rules' max_count) just above.
    std::vector<int> counts_int(gather.counts.begin(), gather.counts.end());
    std::vector<int> displacements_int(gather.displacements.begin(), gather.displacements.end());
    return run_op("all_gather_v", CollectiveKind::kAllGatherV,
                  [this, output, input, counts = std::move(counts_int),
                   displacements = std::move(displacements_int), in_place] {
                    const MPI_Datatype type = mpi_type(input.dtype);
                    complete("MPI_Iallgatherv", [&](MPI_Request* r) {
                      return in_place ? MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL,
                                                        output.data, counts.data(),
                                                        displacements.data(), type, comm_, r)
                                      : MPI_Iallgatherv(input.data, static_cast<int>(input.numel),
                                                        type, output.data, counts.data(),
                                                        displacements.data(), type, comm_, r);
                    });
                    return all_gather_v_traffic(static_cast<std::int64_t>(input.nbytes()),
                                                static_cast<std::int64_t>(output.nbytes()), size_);
                  });
  }

  WorkPtr broadcast(TensorView buffer, int root) override {
    try {
      args_.require_view(buffer, "broadcast", "buffer");
      args_.require_rank(root, "broadcast", "root");
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
    require_same_values(values, name_, what);
  }

  TrafficCounters traffic() const override { return traffic_->snapshot(); }
  void reset_traffic() override { traffic_->reset(); }

  bool uses_shared_memory(bool single_copy_all_gather = false) {
    bool active = false;
    worker_
        ->submit([&] {
          const auto& segment = implementations_[CollectiveAlgorithm::kSharedMemory].implementation;
          active =
              segment != nullptr && (!single_copy_all_gather || segment->single_copy_all_gather());
        })
        ->wait();
    return active;
  }

  // Collective over this group, queued behind its pending operations: symmetric memory of the
  // algorithm that large collectives run through (the shared-memory one), else null.
  SymmetricMemoryPtr allocate_symmetric(std::size_t bytes) {
    check_same_on_all_ranks(bytes, "allocate_symmetric_memory bytes");
    SymmetricMemoryPtr memory;
    worker_
        ->submit([&] {
          begin_op("allocate_symmetric_memory");
          memory = algorithm_for(std::numeric_limits<std::size_t>::max()).allocate_symmetric(bytes);
        })
        ->wait();
    return memory;
  }

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
  void check(int rc, const char* call) const {
    if (rc != MPI_SUCCESS) {
      throw CommError(
          str_cat(call, " failed on rank ", rank_, " of group ", name_, ": ", mpi_error_text(rc)));
    }
  }

  // Worker thread: the algorithm of a reduce_scatter / all_gather of `bytes` per shard or an
  // all_reduce of `bytes` (the same on every rank, so a collective set-up happens at the same
  // point everywhere).
  CollectiveImplementation& algorithm_for(std::size_t bytes) {
    const CollectiveAlgorithm chosen = select_collective_algorithm(
        static_cast<CollectiveAlgorithm>(algorithm_.load()), size_, bytes,
        [this](CollectiveAlgorithm algorithm) { return implementation(algorithm) != nullptr; });
    CollectiveImplementation* chosen_implementation = implementation(chosen);
    SW_CHECK(chosen_implementation != nullptr, "group ", name_, ": collective algorithm ",
             static_cast<int>(chosen), " was chosen but cannot run");
    return *chosen_implementation;
  }

  // Worker thread: the implementation of `algorithm`, built the first time it is asked for;
  // null when it cannot run on this group.
  CollectiveImplementation* implementation(CollectiveAlgorithm algorithm) {
    ImplementationSlot& slot = implementations_[algorithm];
    if (!slot.built) {
      slot.built = true;
      slot.implementation = make_collective_implementation(algorithm, collective_context());
    }
    return slot.implementation.get();
  }

  CollectiveContext collective_context() {
    return CollectiveContext{
        comm_,
        p2p_comm_,
        rank_,
        size_,
        name_,
        [this](const char* call, const std::function<int(MPI_Request*)>& post) {
          complete(call, post);
        },
        [this](int count, MPI_Request* requests, int peer) {
          check(wait_all_or_abort(count, requests, MPI_STATUSES_IGNORE, timeout_seconds_.load(),
                                  [&] { return describe(current_op_, sequence_, peer); }),
                "ring exchange");
        },
        [this](int rc, const char* call) { check(rc, call); },
        [this] { return timeout_seconds_.load(); },
        [this](int peer) { return describe(current_op_, sequence_, peer); }};
  }

  // Worker thread: the body of reduce_scatter; `scale` (fp32 SUM only) multiplies every input.
  void run_reduce_scatter(TensorView output, TensorView input, ReduceOp op, bool in_place,
                          float scale) {
    const int divisor = op == ReduceOp::kAvg ? size_ : 1;
    if (reduces_through_fp32(input.dtype)) {
      SW_CHECK(scale == 1.0f, "reduce_scatter_scaled of ", dtype_name(input.dtype));
      float* staged = scratch_floats(input.numel);
      widen_to_fp32(input, staged);
      CollectiveImplementation& algorithm =
          algorithm_for(static_cast<std::size_t>(output.numel) * sizeof(float));
      narrow_from_fp32(algorithm.reduce_scatter_staged(staged, output.numel, op), output, divisor);
      return;
    }
    CollectiveImplementation& algorithm = algorithm_for(output.nbytes());
    if (scale != 1.0f && !algorithm.folds_input_scale()) {
      float* data = input.as<float>();  // as the default reduce_scatter_scaled does
      for (std::int64_t i = 0; i < input.numel; ++i) data[i] *= scale;
      scale = 1.0f;
    }
    ReduceScatterCall call;
    call.input = static_cast<const std::byte*>(input.data);
    call.output = static_cast<std::byte*>(output.data);
    call.shard_bytes = output.nbytes();
    call.dtype = input.dtype;
    call.op = op;
    call.in_place = in_place;
    call.input_scale = scale;
    algorithm.reduce_scatter(call);
    if (divisor != 1) divide_fp32(output, divisor);
  }

  // Worker thread: all_reduce in place through the chosen algorithm, or MPI's when it has none.
  void run_all_reduce(std::byte* data, std::int64_t numel, DType dtype, ReduceOp op) {
    const std::size_t bytes = static_cast<std::size_t>(numel) * dtype_size(dtype);
    if (!algorithm_for(bytes).all_reduce(data, numel, dtype, op)) {
      implementation(CollectiveAlgorithm::kMpi)->all_reduce(data, numel, dtype, op);
    }
  }

  WorkPtr point_to_point(CollectiveKind kind, TensorView buffer, int peer, int tag) {
    const char* op = kind == CollectiveKind::kSend ? "send" : "recv";
    try {
      args_.require_view(buffer, op, "buffer");
      args_.require_rank(peer, op, "peer");
      SW_REQUIRE(tag >= 0 && tag <= tag_ub_, InvalidArgument, args_.where(op), ": tag ", tag,
                 " outside [0, ", tag_ub_, "]");
      args_.require_count(buffer.numel, op, "message");
    } catch (...) {
      return finished_work(std::current_exception());
    }
    auto work = std::make_shared<P2PWork>(
        kind, buffer,
        str_cat(args_.where(op), kind == CollectiveKind::kSend ? " to rank " : " from rank ", peer,
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
  float* scratch_floats(std::int64_t n) {
    const std::size_t bytes = static_cast<std::size_t>(n) * sizeof(float);
    const std::size_t words = (bytes + sizeof(double) - 1) / sizeof(double);
    if (scratch_.size() < words) scratch_.resize(words);
    return reinterpret_cast<float*>(scratch_.data());
  }

  MPI_Comm comm_;
  std::string name_;
  int rank_ = 0;
  int size_ = 1;
  int tag_ub_ = 32767;
  CollectiveArguments args_;
  std::vector<int> world_ranks_;  // world rank of each rank of this group
  std::atomic<double> timeout_seconds_{kDefaultCommTimeoutSeconds};
  const char* current_op_ = "";  // worker thread only, like sequence_
  std::uint64_t sequence_ = 0;   // operations this group has run (posted, for send/recv)
  std::shared_ptr<TrafficRecorder> traffic_ = std::make_shared<TrafficRecorder>();
  std::vector<double> scratch_;        // touched by the worker thread only
  MPI_Comm p2p_comm_ = MPI_COMM_NULL;  // a duplicate reserved for the algorithms' own messages
  std::atomic<int> algorithm_{static_cast<int>(CollectiveAlgorithm::kAuto)};  // as requested
  struct ImplementationSlot {
    bool built = false;
    std::unique_ptr<CollectiveImplementation> implementation;  // null: cannot run here
  };
  std::map<CollectiveAlgorithm, ImplementationSlot> implementations_;  // worker thread only
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
  if (!mpi_running()) return 1;
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

}  // namespace

bool mpi_running() {
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized != 0 && finalized == 0;
}

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

bool uses_single_copy_all_gather(const ProcessGroupPtr& group) {
  return as_mpi_group(group, "uses_single_copy_all_gather").uses_shared_memory(true);
}

SymmetricMemoryPtr allocate_symmetric_memory(const ProcessGroupPtr& group, std::size_t bytes) {
  SW_REQUIRE(group != nullptr, InvalidArgument, "allocate_symmetric_memory: the group is null");
  SymmetricMemoryPtr memory;
  if (auto* mpi = dynamic_cast<MpiProcessGroup*>(group.get()))
    memory = mpi->allocate_symmetric(bytes);
  return memory != nullptr ? memory : private_symmetric_memory(bytes);
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
