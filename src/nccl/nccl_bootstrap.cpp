// Building an NCCL group from a host group: the ranks first agree that every one of them can
// take part (so no rank is left waiting in ncclCommInitRank for one that threw), rank 0 makes the
// unique id and broadcasts it over the host group, then every rank joins on its device.
#include <mpi.h>

#include <cstring>

#include "gpu_sharing.hpp"
#include "nccl_group_state.hpp"
#include "nccl_status.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/nccl/nccl_process_group.hpp"

namespace shardwise {

using nccl_detail::check_cuda;
using nccl_detail::check_nccl;

namespace {

// World rank of every rank of `host` (the watchdog's message names them).
std::vector<int> gather_world_ranks(ProcessGroup& host) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  int world_rank = host.rank();
  if (initialized != 0) MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  std::vector<int> ranks(static_cast<std::size_t>(host.size()), 0);
  const TensorView all{ranks.data(), host.size(), DType::kInt32};
  const TensorView own = all.slice(host.rank(), 1);
  *own.as<int>() = world_rank;
  host.all_gather(all, own)->wait();
  return ranks;
}

ncclUniqueId broadcast_unique_id(ProcessGroup& host) {
  ncclUniqueId id;
  std::memset(&id, 0, sizeof id);
  if (host.rank() == 0) check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
  host.broadcast(TensorView{&id, static_cast<std::int64_t>(sizeof id), DType::kUInt8}, 0)->wait();
  return id;
}

// Streams, the ready event and the barrier's scratch float on `state.device`.
void create_device_resources(NcclGroupState& state) {
  check_cuda(cudaStreamCreateWithFlags(&state.stream, cudaStreamNonBlocking),
             "cudaStreamCreateWithFlags");
  check_cuda(cudaEventCreateWithFlags(&state.ready, cudaEventDisableTiming), "cudaEventCreate");
  check_cuda(cudaMalloc(&state.barrier_scratch, sizeof(float)), "cudaMalloc");
  check_cuda(cudaMemset(state.barrier_scratch, 0, sizeof(float)), "cudaMemset");
}

}  // namespace

NcclProcessGroup::NcclProcessGroup(const ProcessGroupPtr& host_group, int device,
                                   const NcclOptions& options)
    : state_(std::make_shared<NcclGroupState>()) {
  SW_REQUIRE(host_group != nullptr, InvalidArgument, "NCCL group: no host group to build it from");
  NcclGroupState& state = *state_;
  state.host = host_group;
  state.name = host_group->name();
  state.rank = host_group->rank();
  state.size = host_group->size();
  state.device = device;
  state.timeout_seconds = options.comm_timeout_seconds;
  state.compute_stream = static_cast<cudaStream_t>(options.compute_stream);
  const std::string who = str_cat("NCCL group ", state.name, " (rank ", state.rank, ")");

  // Every rank checks its own arguments, then all learn whether any rank failed.
  std::exception_ptr local_error;
  try {
    validate_comm_timeout(options.comm_timeout_seconds, who);
    nccl_detail::require_device_exists(device, who);
  } catch (const InvalidArgument&) {
    local_error = std::current_exception();
  }
  try {
    host_group->check_same_on_all_ranks(
        local_error ? 0 : 1, str_cat("whether each rank can join NCCL group ", state.name,
                                     " (0: the rank's own error says why)"));
  } catch (const CommError&) {
    if (local_error) std::rethrow_exception(local_error);  // this rank's reason, not the tally
    throw;
  }
  if (local_error) std::rethrow_exception(local_error);

  // NCCL cannot put two ranks on one GPU; say so plainly instead of leaving it to
  // ncclCommInitRank.
  const std::string shared = describe_shared_gpu(host_group, device);
  SW_REQUIRE(shared.empty(), InvalidArgument, who, ": ", shared,
             "; NCCL needs one GPU per rank (use a host-staged group when ranks share GPUs)");
  state.world_ranks = gather_world_ranks(*host_group);
  const ncclUniqueId id = broadcast_unique_id(*host_group);
  nccl_detail::DeviceGuard guard(device);
  create_device_resources(state);
  check_nccl(ncclCommInitRank(&state.comm, state.size, id, state.rank),
             str_cat("ncclCommInitRank for ", who, " on device ", device).c_str());
}

}  // namespace shardwise
