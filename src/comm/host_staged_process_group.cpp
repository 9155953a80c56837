#include "shardwise/comm/host_staged_process_group.hpp"

#include <algorithm>
#include <utility>

#include "shardwise/comm/ordered_worker.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise {

StagingPool::StagingPool(std::shared_ptr<DeviceStaging> staging)
    : staging_(std::move(staging)), state_(std::make_shared<State>()) {}

std::shared_ptr<std::byte> StagingPool::acquire(std::size_t nbytes) {
  std::lock_guard lock(state_->mutex);
  std::vector<Slot>& slots = state_->slots;
  std::size_t best = slots.size();
  for (std::size_t i = 0; i < slots.size(); ++i) {
    if (slots[i].in_use || slots[i].nbytes < nbytes) continue;
    if (best == slots.size() || slots[i].nbytes < slots[best].nbytes) best = i;
  }
  if (best == slots.size()) {
    slots.push_back({staging_->allocate_host(std::max<std::size_t>(nbytes, 1)), nbytes, false});
  }
  slots[best].in_use = true;
  // The lease frees its slot (found by address: slots may move as the vector grows).
  std::byte* data = slots[best].memory.get();
  return {data, [state = state_](std::byte* p) {  // keeps the memory alive with the lease
            std::lock_guard lock(state->mutex);
            for (Slot& s : state->slots) {
              if (s.memory.get() == p) s.in_use = false;
            }
          }};
}

std::size_t StagingPool::allocated() const {
  std::lock_guard lock(state_->mutex);
  return state_->slots.size();
}

std::size_t StagingPool::allocated_bytes() const {
  std::lock_guard lock(state_->mutex);
  std::size_t total = 0;
  for (const Slot& s : state_->slots) total += s.nbytes;
  return total;
}

// Named, not anonymous: HostStagedProcessGroup::Plan (declared in the header) holds CopyBacks.
namespace host_staging_detail {

// A device range to copy back from host staging once the collective has completed.
struct CopyBack {
  TensorView device;
  const std::byte* host = nullptr;
};

// The host group's Work, followed by the copies back to the device. Whoever first sees the
// collective complete (wait or is_completed) copies, so later device reads see the result.
class StagedWork final : public Work {
 public:
  StagedWork(WorkPtr host_work, std::vector<CopyBack> copies,
             std::vector<std::shared_ptr<std::byte>> leases, std::shared_ptr<DeviceStaging> staging)
      : host_work_(std::move(host_work)),
        copies_(std::move(copies)),
        leases_(std::move(leases)),
        staging_(std::move(staging)) {}

  void wait() override {
    host_work_->wait();  // rethrows the collective's error, every time
    copy_back();
  }

  bool is_completed() override {
    if (!host_work_->is_completed()) return false;
    try {
      wait();
    } catch (...) {
      // Completed with an error: wait() reports it.
    }
    return true;
  }

 private:
  void copy_back() {
    std::lock_guard lock(mutex_);
    if (copied_) return;
    for (const CopyBack& c : copies_) staging_->copy_to_device(c.device, c.host);
    copied_ = true;
    leases_.clear();  // the staging buffers go back to the pool
  }

  WorkPtr host_work_;
  std::vector<CopyBack> copies_;
  std::vector<std::shared_ptr<std::byte>> leases_;
  std::shared_ptr<DeviceStaging> staging_;
  std::mutex mutex_;
  bool copied_ = false;
};

bool same_view(const TensorView& a, const TensorView& b) {
  return a.data == b.data && a.numel == b.numel && a.dtype == b.dtype && a.device == b.device;
}

bool bytes_within(const TensorView& part, const TensorView& whole) {
  const auto* p = static_cast<const std::byte*>(part.data);
  const auto* w = static_cast<const std::byte*>(whole.data);
  return part.device == whole.device && p >= w && p + part.nbytes() <= w + whole.nbytes();
}

}  // namespace host_staging_detail

using host_staging_detail::bytes_within;
using host_staging_detail::CopyBack;
using host_staging_detail::same_view;
using host_staging_detail::StagedWork;

// The host stand-ins of one operation's arguments: staging buffers for device views (filled
// from the device when the operation reads them), and what to copy back afterwards.
class HostStagedProcessGroup::Plan {
 public:
  explicit Plan(HostStagedProcessGroup& group) : group_(group) {}

  TensorView stage(const TensorView& v, bool copy_in, bool copy_out) {
    if (!v.on_device()) return v;
    std::shared_ptr<std::byte> lease = group_.pool_.acquire(v.nbytes());
    const TensorView host{lease.get(), v.numel, v.dtype, TensorView::kHostMemory};
    leases_.push_back(std::move(lease));
    if (copy_in && v.numel > 0) group_.staging_->copy_to_host(host.data, v);
    if (copy_out && v.numel > 0) copies_.push_back({v, static_cast<const std::byte*>(host.data)});
    return host;
  }

  // `part` inside `whole`, already staged as `whole_host`, is the same bytes of the staging
  // (an in-place collective stays in place on the host); otherwise it is staged on its own.
  TensorView stage_within(const TensorView& part, const TensorView& whole,
                          const TensorView& whole_host, bool copy_in, bool copy_out) {
    if (!part.on_device() || !whole.on_device() || !bytes_within(part, whole)) {
      return stage(part, copy_in, copy_out);
    }
    const auto offset = static_cast<std::size_t>(static_cast<const std::byte*>(part.data) -
                                                 static_cast<const std::byte*>(whole.data));
    const TensorView host{static_cast<std::byte*>(whole_host.data) + offset, part.numel, part.dtype,
                          TensorView::kHostMemory};
    if (copy_in && part.numel > 0) group_.staging_->copy_to_host(host.data, part);
    if (copy_out && part.numel > 0) {
      copies_.push_back({part, static_cast<const std::byte*>(host.data)});
    }
    return host;
  }

  WorkPtr finish(WorkPtr host_work) {
    if (copies_.empty() && leases_.empty()) return host_work;  // host views only
    return std::make_shared<StagedWork>(std::move(host_work), std::move(copies_),
                                        std::move(leases_), group_.staging_);
  }

 private:
  HostStagedProcessGroup& group_;
  std::vector<CopyBack> copies_;
  std::vector<std::shared_ptr<std::byte>> leases_;
};

HostStagedProcessGroup::HostStagedProcessGroup(ProcessGroupPtr host_group,
                                               std::shared_ptr<DeviceStaging> staging)
    : host_(std::move(host_group)), staging_(std::move(staging)), pool_(staging_) {
  SW_REQUIRE(host_ != nullptr, InvalidArgument, "HostStagedProcessGroup: the host group is null");
  SW_REQUIRE(staging_ != nullptr, InvalidArgument, "HostStagedProcessGroup on group ",
             host_->name(), ": no device staging");
}

bool HostStagedProcessGroup::leaves_device_data_unchanged(const TensorView& output,
                                                          const TensorView& input) const {
  // One rank, in place, on the device: a reduction or gather over one rank moves nothing, so
  // the round trip through staging (the whole buffer, twice) is skipped.
  return size() == 1 && output.on_device() && same_view(output, input);
}

WorkPtr HostStagedProcessGroup::all_reduce(TensorView buffer, ReduceOp op) {
  if (leaves_device_data_unchanged(buffer, buffer)) return finished_work();
  Plan plan(*this);
  const TensorView host = plan.stage(buffer, true, true);
  return plan.finish(host_->all_reduce(host, op));
}

WorkPtr HostStagedProcessGroup::reduce_scatter(TensorView output, TensorView input, ReduceOp op) {
  if (leaves_device_data_unchanged(output, input)) return finished_work();
  Plan plan(*this);
  const TensorView in = plan.stage(input, true, false);
  const TensorView out = plan.stage_within(output, input, in, false, true);
  return plan.finish(host_->reduce_scatter(out, in, op));
}

WorkPtr HostStagedProcessGroup::reduce_scatter_scaled(TensorView output, TensorView input,
                                                      double input_scale) {
  if (input_scale == 1.0 && input.dtype == DType::kFloat32 &&
      leaves_device_data_unchanged(output, input)) {
    return finished_work();
  }
  Plan plan(*this);
  const TensorView in = plan.stage(input, true, false);
  const TensorView out = plan.stage_within(output, input, in, false, true);
  return plan.finish(host_->reduce_scatter_scaled(out, in, input_scale));
}

WorkPtr HostStagedProcessGroup::all_gather(TensorView output, TensorView input) {
  if (leaves_device_data_unchanged(output, input)) return finished_work();
  Plan plan(*this);
  const TensorView out = plan.stage(output, false, true);
  const TensorView in = plan.stage_within(input, output, out, true, false);
  return plan.finish(host_->all_gather(out, in));
}

WorkPtr HostStagedProcessGroup::all_gather_v(TensorView output, TensorView input,
                                             const std::vector<std::int64_t>& counts) {
  Plan plan(*this);
  const TensorView out = plan.stage(output, false, true);
  const TensorView in = plan.stage_within(input, output, out, true, false);
  return plan.finish(host_->all_gather_v(out, in, counts));
}

WorkPtr HostStagedProcessGroup::broadcast(TensorView buffer, int root) {
  if (root == 0 && leaves_device_data_unchanged(buffer, buffer)) return finished_work();
  Plan plan(*this);
  const bool is_root = root == rank();
  const TensorView host = plan.stage(buffer, is_root, !is_root);
  return plan.finish(host_->broadcast(host, root));
}

WorkPtr HostStagedProcessGroup::send(TensorView buffer, int peer, int tag) {
  Plan plan(*this);
  const TensorView host = plan.stage(buffer, true, false);
  return plan.finish(host_->send(host, peer, tag));
}

WorkPtr HostStagedProcessGroup::recv(TensorView buffer, int peer, int tag) {
  Plan plan(*this);
  const TensorView host = plan.stage(buffer, false, true);
  return plan.finish(host_->recv(host, peer, tag));
}

}  // namespace shardwise
