// HostStagedProcessGroup: the collectives of a host process group (MPI) for views in device
// memory. Device arguments are copied into host staging buffers (pinned, pooled and reused), the
// host group runs the collective asynchronously as it always does, and the results are copied
// back to the device when the Work is waited for (or polled complete). Host arguments pass
// straight through. A group of one rank skips the staging of in-place calls on device views (they
// move nothing). What ranks sharing one GPU use; the copies are supplied by the device layer
// (DeviceStaging), so this file needs no CUDA.
//
// Ordering: the copy into staging happens when the operation is issued and sees every device
// write issued before it (the device layer's copy synchronises with the device's work); the
// device views must not be written again until wait() returned, as for any Work.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "shardwise/comm/process_group.hpp"

namespace shardwise {

// Host staging memory and the copies between it and device memory.
class DeviceStaging {
 public:
  virtual ~DeviceStaging() = default;
  // `nbytes` of host memory suited to device copies (pinned).
  virtual std::shared_ptr<std::byte> allocate_host(std::size_t nbytes) = 0;
  // Synchronous copies; `device` is a device view of the bytes to move.
  virtual void copy_to_host(void* host, const TensorView& device) = 0;
  virtual void copy_to_device(const TensorView& device, const void* host) = 0;
};

// Reuses host staging buffers: a buffer goes back to the pool when the last lease on it is
// dropped, and a request takes the smallest free buffer that is large enough, so after the first
// iteration a training loop allocates nothing.
class StagingPool {
 public:
  explicit StagingPool(std::shared_ptr<DeviceStaging> staging);
  // A lease on at least `nbytes` bytes.
  std::shared_ptr<std::byte> acquire(std::size_t nbytes);
  // Buffers allocated so far, free or not.
  std::size_t allocated() const;
  std::size_t allocated_bytes() const;

 private:
  struct Slot {
    std::shared_ptr<std::byte> memory;
    std::size_t nbytes = 0;
    bool in_use = false;
  };
  std::shared_ptr<DeviceStaging> staging_;
  // Shared with the leases, so a lease may outlive the pool.
  struct State {
    std::mutex mutex;
    std::vector<Slot> slots;
  };
  std::shared_ptr<State> state_;
};

class HostStagedProcessGroup final : public ProcessGroup {
 public:
  // InvalidArgument when either argument is null.
  HostStagedProcessGroup(ProcessGroupPtr host_group, std::shared_ptr<DeviceStaging> staging);

  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }
  std::string name() const override { return host_->name(); }
  const ProcessGroupPtr& host_group() const { return host_; }
  const StagingPool& pool() const { return pool_; }

  WorkPtr all_reduce(TensorView buffer, ReduceOp op) override;
  WorkPtr reduce_scatter(TensorView output, TensorView input, ReduceOp op) override;
  WorkPtr reduce_scatter_scaled(TensorView output, TensorView input, double input_scale) override;
  WorkPtr all_gather(TensorView output, TensorView input) override;
  WorkPtr all_gather_v(TensorView output, TensorView input,
                       const std::vector<std::int64_t>& counts) override;
  WorkPtr broadcast(TensorView buffer, int root) override;
  WorkPtr send(TensorView buffer, int peer, int tag) override;
  WorkPtr recv(TensorView buffer, int peer, int tag) override;
  WorkPtr barrier() override { return host_->barrier(); }
  void check_same_on_all_ranks(std::uint64_t value, const std::string& what) override {
    host_->check_same_on_all_ranks(value, what);
  }
  TrafficCounters traffic() const override { return host_->traffic(); }
  void reset_traffic() override { host_->reset_traffic(); }

 private:
  class Plan;
  bool leaves_device_data_unchanged(const TensorView& output, const TensorView& input) const;
  ProcessGroupPtr host_;
  std::shared_ptr<DeviceStaging> staging_;
  StagingPool pool_;
};

}  // namespace shardwise
