// NCCL backend of ProcessGroup for buffers in GPU memory. One group is one NCCL communicator on
// one device, bootstrapped over a host (MPI) group: rank 0 makes the unique id and broadcasts it
// over the host group, then every rank joins. Operations are enqueued on the group's own CUDA
// stream, after the work already queued on the group's compute stream, so bucket collectives run
// while the backward pass goes on; a Work completes when the operation's CUDA event has fired.
// Like the other public CUDA headers, this one needs no CUDA headers (streams are void*).
#pragma once

#include <memory>
#include <string>

#include "shardwise/comm/comm_deadline.hpp"
#include "shardwise/comm/process_group.hpp"

namespace shardwise {

struct NcclOptions {
  // The watchdog: a wait() that has not seen its operation complete after this many seconds
  // aborts the communicator (ncclCommAbort) and throws CommError naming the group, operation and
  // timeout; every later operation of the group is refused.
  double comm_timeout_seconds = kDefaultCommTimeoutSeconds;
  // The stream whose work produces and consumes the buffers passed to the group (nullptr: the
  // legacy default stream). Each operation waits for what is queued there when it is issued.
  void* compute_stream = nullptr;
};

struct NcclGroupState;

class NcclProcessGroup : public ProcessGroup {
 public:
  // Collective over `host_group` (every rank calls it, each with its own device index). Throws
  // InvalidArgument for a device that does not exist, CommError when NCCL cannot set up the
  // communicator (two ranks on one GPU, for one).
  NcclProcessGroup(const ProcessGroupPtr& host_group, int device, const NcclOptions& options = {});
  ~NcclProcessGroup() override;
  NcclProcessGroup(const NcclProcessGroup&) = delete;
  NcclProcessGroup& operator=(const NcclProcessGroup&) = delete;

  int rank() const override;
  int size() const override;
  std::string name() const override;
  int device() const;
  // The stream NCCL runs on (a cudaStream_t), and the compute stream operations wait for.
  void* stream() const;
  void set_compute_stream(void* stream);
  // Aborts the communicator (ncclCommAbort): pending operations end, later ones are refused.
  void abort();
  bool aborted() const;

  // Every view must live on device(); host views are refused (InvalidArgument from wait()).
  WorkPtr all_reduce(TensorView buffer, ReduceOp op) override;
  WorkPtr reduce_scatter(TensorView output, TensorView input, ReduceOp op) override;
  // fp32 only; the scale is folded into the reduction (ncclRedOpCreatePreMulSum), so `input` is
  // left as it was.
  WorkPtr reduce_scatter_scaled(TensorView output, TensorView input, double input_scale) override;
  WorkPtr all_gather(TensorView output, TensorView input) override;
  WorkPtr all_gather_v(TensorView output, TensorView input,
                       const std::vector<std::int64_t>& counts) override;
  WorkPtr broadcast(TensorView buffer, int root) override;
  // NCCL matches sends and receives between two ranks in issue order and has no tags: `tag` must
  // still agree between the pair (it is checked against nothing but kept for the interface). A
  // send blocks the group's stream until its receive is posted, so two ranks that both send to
  // each other first deadlock (unlike the MPI group, whose sends are buffered).
  WorkPtr send(TensorView buffer, int peer, int tag) override;
  WorkPtr recv(TensorView buffer, int peer, int tag) override;
  WorkPtr barrier() override;

  // Through the host group the communicator was built from.
  void check_same_on_all_ranks(std::uint64_t value, const std::string& what) override;

  TrafficCounters traffic() const override;
  void reset_traffic() override;

 private:
  std::shared_ptr<NcclGroupState> state_;
};

// Makes the NCCL group of `host_group` on `device` (collective over host_group).
ProcessGroupPtr make_nccl_process_group(const ProcessGroupPtr& host_group, int device,
                                        const NcclOptions& options = {});

// The NCCL counterpart of every group in `host` (world, data / tensor / pipeline parallel and
// the expert groups), each with a communicator of its own on `device`; `sizes` is copied. Every
// rank builds them in the same order, so each is collective over its own host group.
ParallelGroups make_nccl_parallel_groups(const ParallelGroups& host, int device,
                                         const NcclOptions& options = {});

// Makes `stream` (a cudaStream_t; nullptr = the legacy default stream) wait on the GPU for an
// NCCL group's operation, without blocking the host; rethrows its error if it already failed.
// Throws InvalidArgument for a Work that did not come from an NcclProcessGroup.
void wait_on_stream(const WorkPtr& work, void* stream);

}  // namespace shardwise
