#include "shardwise/nccl/nccl_process_group.hpp"

#include <functional>

#include "nccl_group_state.hpp"
#include "nccl_status.hpp"
#include "nccl_work.hpp"
#include "shardwise/comm/collective_arguments.hpp"
#include "shardwise/comm/ordered_worker.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise {

using nccl_detail::check_cuda;
using nccl_detail::check_nccl;
using nccl_detail::DeviceGuard;
using nccl_detail::NcclOperation;
using nccl_detail::NcclWork;

namespace {

using Enqueue = std::function<void(ncclComm_t, cudaStream_t)>;

// Argument errors become a Work that is already completed and rethrows from wait().
template <typename F>
WorkPtr reported(F&& issue_operation) {
  try {
    return issue_operation();
  } catch (...) {
    return finished_work(std::current_exception());
  }
}

cudaEvent_t timing_event() {
  cudaEvent_t event = nullptr;
  check_cuda(cudaEventCreate(&event), "cudaEventCreate");
  return event;
}

// Enqueues one operation on the group's stream, behind the work queued on its compute stream,
// between the two events its Work watches.
WorkPtr issue(const std::shared_ptr<NcclGroupState>& state, CollectiveKind kind, int peer,
              TrafficVolume volume, const Enqueue& enqueue) {
  std::lock_guard<std::mutex> lock(state->issue_mutex);
  const char* op = collective_kind_name(kind);
  SW_REQUIRE(!state->aborted(), CommError, op, " on NCCL group ", state->name,
             ": the communicator was aborted (", state->abort_reason(), ")");
  DeviceGuard guard(state->device);
  check_cuda(cudaEventRecord(state->ready, state->compute_stream), "cudaEventRecord");
  check_cuda(cudaStreamWaitEvent(state->stream, state->ready, 0), "cudaStreamWaitEvent");
  cudaEvent_t start = timing_event();
  cudaEvent_t end = nullptr;
  try {
    end = timing_event();
    check_cuda(cudaEventRecord(start, state->stream), "cudaEventRecord");
    enqueue(state->comm, state->stream);
    check_cuda(cudaEventRecord(end, state->stream), "cudaEventRecord");
  } catch (...) {
    cudaEventDestroy(start);
    if (end != nullptr) cudaEventDestroy(end);
    throw;
  }
  const NcclOperation operation{kind, ++state->sequence, peer};
  state->record_issue(kind, volume);
  return std::make_shared<NcclWork>(state, operation, start, end);
}

CollectiveArguments arguments_of(const NcclGroupState& state) {
  return CollectiveArguments(state.name, state.rank, state.size,
                             {.group_kind = "NCCL group",
                              .device = state.device,
                              .max_count = INT64_MAX,
                              .host_group_hint = " (use a host group for host buffers)"});
}

std::int64_t bytes_of(const TensorView& v) { return static_cast<std::int64_t>(v.nbytes()); }

void* byte_offset(const TensorView& v, std::int64_t elements) {
  return static_cast<std::byte*>(v.data) +
         elements * static_cast<std::int64_t>(dtype_size(v.dtype));
}

}  // namespace

// Bootstrap (the constructor) lives in nccl_bootstrap.cpp.

NcclProcessGroup::~NcclProcessGroup() = default;

int NcclProcessGroup::rank() const { return state_->rank; }
int NcclProcessGroup::size() const { return state_->size; }
std::string NcclProcessGroup::name() const { return state_->name; }
int NcclProcessGroup::device() const { return state_->device; }
void* NcclProcessGroup::stream() const { return state_->stream; }

void NcclProcessGroup::set_compute_stream(void* stream) {
  std::lock_guard<std::mutex> lock(state_->issue_mutex);
  state_->compute_stream = static_cast<cudaStream_t>(stream);
}

void NcclProcessGroup::abort() { state_->abort("aborted by its owner"); }
bool NcclProcessGroup::aborted() const { return state_->aborted(); }

WorkPtr NcclProcessGroup::all_reduce(TensorView buffer, ReduceOp op) {
  return reported([&] {
    const CollectiveArguments args = arguments_of(*state_);
    args.require_view(buffer, "all_reduce", "buffer");
    args.require_reducible(buffer.dtype, op, "all_reduce");
    const ncclDataType_t type = nccl_detail::nccl_type(buffer.dtype, args.where("all_reduce"));
    return issue(
        state_, CollectiveKind::kAllReduce, -1, all_reduce_traffic(bytes_of(buffer), state_->size),
        [=](ncclComm_t comm, cudaStream_t stream) {
          check_nccl(ncclAllReduce(buffer.data, buffer.data, static_cast<std::size_t>(buffer.numel),
                                   type, nccl_detail::nccl_op(op), comm, stream),
                     "ncclAllReduce");
        });
  });
}

WorkPtr NcclProcessGroup::reduce_scatter(TensorView output, TensorView input, ReduceOp op) {
  return reported([&] {
    const CollectiveArguments args = arguments_of(*state_);
    args.reduce_scatter(output, input, op);
    const ncclDataType_t type = nccl_detail::nccl_type(input.dtype, args.where("reduce_scatter"));
    return issue(state_, CollectiveKind::kReduceScatter, -1,
                 reduce_scatter_traffic(bytes_of(input), state_->size),
                 [=](ncclComm_t comm, cudaStream_t stream) {
                   check_nccl(ncclReduceScatter(input.data, output.data,
                                                static_cast<std::size_t>(output.numel), type,
                                                nccl_detail::nccl_op(op), comm, stream),
                              "ncclReduceScatter");
                 });
  });
}

WorkPtr NcclProcessGroup::reduce_scatter_scaled(TensorView output, TensorView input,
                                                double input_scale) {
  return reported([&] {
    const CollectiveArguments args = arguments_of(*state_);
    SW_REQUIRE(input.dtype == DType::kFloat32, InvalidArgument, args.where("reduce_scatter_scaled"),
               ": input is ", dtype_name(input.dtype), ", expected fp32");
    args.reduce_scatter(output, input, ReduceOp::kSum);
    // The scale as the caller would have applied it: every element multiplied by float(scale).
    float scale = static_cast<float>(input_scale);
    return issue(state_, CollectiveKind::kReduceScatter, -1,
                 reduce_scatter_traffic(bytes_of(input), state_->size),
                 [=](ncclComm_t comm, cudaStream_t stream) mutable {
                   ncclRedOp_t scaled_sum;
                   check_nccl(ncclRedOpCreatePreMulSum(&scaled_sum, &scale, ncclFloat32,
                                                       ncclScalarHostImmediate, comm),
                              "ncclRedOpCreatePreMulSum");
                   const ncclResult_t status = ncclReduceScatter(
                       input.data, output.data, static_cast<std::size_t>(output.numel), ncclFloat32,
                       scaled_sum, comm, stream);
                   // The operator may go as soon as the call that uses it has returned.
                   ncclRedOpDestroy(scaled_sum, comm);
                   check_nccl(status, "ncclReduceScatter (pre-multiplied sum)");
                 });
  });
}

WorkPtr NcclProcessGroup::all_gather(TensorView output, TensorView input) {
  return reported([&] {
    const CollectiveArguments args = arguments_of(*state_);
    args.all_gather(output, input);
    const ncclDataType_t type = nccl_detail::nccl_type(input.dtype, args.where("all_gather"));
    return issue(
        state_, CollectiveKind::kAllGather, -1, all_gather_traffic(bytes_of(output), state_->size),
        [=](ncclComm_t comm, cudaStream_t stream) {
          check_nccl(ncclAllGather(input.data, output.data, static_cast<std::size_t>(input.numel),
                                   type, comm, stream),
                     "ncclAllGather");
        });
  });
}

// One broadcast per rank's block, fused into one launch by an NCCL group call.
WorkPtr NcclProcessGroup::all_gather_v(TensorView output, TensorView input,
                                       const std::vector<std::int64_t>& counts) {
  return reported([&] {
    const CollectiveArguments args = arguments_of(*state_);
    GatherCounts gather;
    args.all_gather_v(output, input, counts, gather);
    const std::vector<std::int64_t> offsets = std::move(gather.displacements);
    const ncclDataType_t type = nccl_detail::nccl_type(input.dtype, args.where("all_gather_v"));
    const int own = state_->rank;
    return issue(state_, CollectiveKind::kAllGatherV, -1,
                 all_gather_v_traffic(bytes_of(input), bytes_of(output), state_->size),
                 [=](ncclComm_t comm, cudaStream_t stream) {
                   check_nccl(ncclGroupStart(), "ncclGroupStart");
                   ncclResult_t status = ncclSuccess;
                   for (std::size_t r = 0; r < counts.size() && status == ncclSuccess; ++r) {
                     if (counts[r] == 0) continue;
                     void* block = byte_offset(output, offsets[r]);
                     const void* source = static_cast<int>(r) == own ? input.data : block;
                     status = ncclBroadcast(source, block, static_cast<std::size_t>(counts[r]),
                                            type, static_cast<int>(r), comm, stream);
                   }
                   const ncclResult_t ended = ncclGroupEnd();
                   check_nccl(status, "ncclBroadcast (all_gather_v block)");
                   check_nccl(ended, "ncclGroupEnd (all_gather_v)");
                 });
  });
}

WorkPtr NcclProcessGroup::broadcast(TensorView buffer, int root) {
  return reported([&] {
    const CollectiveArguments args = arguments_of(*state_);
    args.require_view(buffer, "broadcast", "buffer");
    args.require_rank(root, "broadcast", "root");
    const ncclDataType_t type = nccl_detail::nccl_type(buffer.dtype, args.where("broadcast"));
    return issue(
        state_, CollectiveKind::kBroadcast, -1,
        broadcast_traffic(bytes_of(buffer), state_->size, state_->rank, root),
        [=](ncclComm_t comm, cudaStream_t stream) {
          check_nccl(ncclBroadcast(buffer.data, buffer.data, static_cast<std::size_t>(buffer.numel),
                                   type, root, comm, stream),
                     "ncclBroadcast");
        });
  });
}

WorkPtr NcclProcessGroup::send(TensorView buffer, int peer, int /*tag*/) {
  return reported([&] {
    const CollectiveArguments args = arguments_of(*state_);
    args.require_view(buffer, "send", "buffer");
    args.require_rank(peer, "send", "peer");
    SW_REQUIRE(peer != state_->rank, InvalidArgument, args.where("send"),
               ": a rank cannot send to itself through NCCL outside a group call");
    const ncclDataType_t type = nccl_detail::nccl_type(buffer.dtype, args.where("send"));
    return issue(state_, CollectiveKind::kSend, peer, TrafficVolume{bytes_of(buffer), 0},
                 [=](ncclComm_t comm, cudaStream_t stream) {
                   check_nccl(ncclSend(buffer.data, static_cast<std::size_t>(buffer.numel), type,
                                       peer, comm, stream),
                              "ncclSend");
                 });
  });
}

WorkPtr NcclProcessGroup::recv(TensorView buffer, int peer, int /*tag*/) {
  return reported([&] {
    const CollectiveArguments args = arguments_of(*state_);
    args.require_view(buffer, "recv", "buffer");
    args.require_rank(peer, "recv", "peer");
    SW_REQUIRE(peer != state_->rank, InvalidArgument, args.where("recv"),
               ": a rank cannot receive from itself through NCCL outside a group call");
    const ncclDataType_t type = nccl_detail::nccl_type(buffer.dtype, args.where("recv"));
    return issue(state_, CollectiveKind::kRecv, peer, TrafficVolume{0, bytes_of(buffer)},
                 [=](ncclComm_t comm, cudaStream_t stream) {
                   check_nccl(ncclRecv(buffer.data, static_cast<std::size_t>(buffer.numel), type,
                                       peer, comm, stream),
                              "ncclRecv");
                 });
  });
}

// An all-reduce of one device float: complete on a rank once every rank has issued it.
WorkPtr NcclProcessGroup::barrier() {
  return reported([&] {
    float* scratch = state_->barrier_scratch;
    return issue(state_, CollectiveKind::kBarrier, -1, TrafficVolume{},
                 [=](ncclComm_t comm, cudaStream_t stream) {
                   check_nccl(
                       ncclAllReduce(scratch, scratch, 1, ncclFloat32, ncclSum, comm, stream),
                       "ncclAllReduce (barrier)");
                 });
  });
}

void NcclProcessGroup::check_same_on_all_ranks(std::uint64_t value, const std::string& what) {
  state_->host->check_same_on_all_ranks(value, what);
}

TrafficCounters NcclProcessGroup::traffic() const { return state_->traffic(); }
void NcclProcessGroup::reset_traffic() { state_->reset_traffic(); }

ProcessGroupPtr make_nccl_process_group(const ProcessGroupPtr& host_group, int device,
                                        const NcclOptions& options) {
  return std::make_shared<NcclProcessGroup>(host_group, device, options);
}

void wait_on_stream(const WorkPtr& work, void* stream) {
  SW_REQUIRE(work != nullptr, InvalidArgument, "wait_on_stream: no work");
  if (auto* nccl_work = dynamic_cast<NcclWork*>(work.get())) {
    nccl_work->block_stream(static_cast<cudaStream_t>(stream));
    return;
  }
  // Operations refused when issued come back as completed Works that rethrow their error.
  SW_REQUIRE(work->is_completed(), InvalidArgument,
             "wait_on_stream: the work is not an NCCL group's operation");
  work->wait();
}

}  // namespace shardwise
