// HostStagedProcessGroup over the MPI world, with a stand-in for device memory: the "device" bytes
// are host memory in views tagged device 0 and the staging copies are memcpy, counted. Checks that
// every collective the DDP uses gives the host group's result, in place where the call is in
// place, that results reach the device views only when the Work completes (they really went
// through staging), that the staging pool stops allocating after the first iteration, that a
// one-rank group skips staging in-place calls, and that the plain MPI group refuses device views.
#include "shardwise/comm/host_staged_process_group.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "shardwise/comm/mpi_process_group.hpp"

namespace shardwise {
namespace {

class FakeDeviceStaging final : public DeviceStaging {
 public:
  std::shared_ptr<std::byte> allocate_host(std::size_t nbytes) override {
    ++allocations;
    return std::shared_ptr<std::byte>(new std::byte[nbytes], std::default_delete<std::byte[]>());
  }
  void copy_to_host(void* host, const TensorView& device) override {
    EXPECT_TRUE(device.on_device());
    std::memcpy(host, device.data, device.nbytes());
    ++to_host;
  }
  void copy_to_device(const TensorView& device, const void* host) override {
    EXPECT_TRUE(device.on_device());
    std::memcpy(device.data, host, device.nbytes());
    ++to_device;
  }
  int allocations = 0, to_host = 0, to_device = 0;
};

constexpr int kDevice = 0;

TensorView device_view(std::vector<float>& v) {
  return {v.data(), static_cast<std::int64_t>(v.size()), DType::kFloat32, kDevice};
}
TensorView host_view(std::vector<float>& v) {
  return {v.data(), static_cast<std::int64_t>(v.size()), DType::kFloat32};
}

std::vector<float> rank_values(int rank, std::size_t n, int salt) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    v[i] = static_cast<float>((rank + 1) * 0.25 + static_cast<double>(i % 7) * 0.5 + salt);
  }
  return v;
}

struct Rig {
  ProcessGroupPtr world = init_mpi_world();
  std::shared_ptr<FakeDeviceStaging> staging = std::make_shared<FakeDeviceStaging>();
  HostStagedProcessGroup staged{world, staging};
};

TEST(HostStagedProcessGroup, InPlaceReduceScatterAndAllGatherMatchTheHostGroup) {
  Rig rig;
  const int p = rig.world->size(), r = rig.world->rank();
  const std::size_t shard = 5, n = shard * static_cast<std::size_t>(p);
  for (bool scaled : {false, true}) {
    std::vector<float> dev = rank_values(r, n, 1), host = dev;
    const TensorView d = device_view(dev), h = host_view(host);
    const auto ds = d.slice(static_cast<std::int64_t>(shard) * r, static_cast<std::int64_t>(shard));
    const auto hs = h.slice(static_cast<std::int64_t>(shard) * r, static_cast<std::int64_t>(shard));
    WorkPtr work = scaled ? rig.staged.reduce_scatter_scaled(ds, d, 0.5)
                          : rig.staged.reduce_scatter(ds, d, ReduceOp::kSum);
    (scaled ? rig.world->reduce_scatter_scaled(hs, h, 0.5)
            : rig.world->reduce_scatter(hs, h, ReduceOp::kSum))
        ->wait();
    work->wait();
    EXPECT_EQ(0, std::memcmp(ds.data, hs.data, ds.nbytes())) << "scaled " << scaled;

    // In-place all-gather of the reduced shards.
    rig.staged.all_gather(d, ds)->wait();
    rig.world->all_gather(h, hs)->wait();
    EXPECT_EQ(dev, host);
  }
}

TEST(HostStagedProcessGroup, ResultsReachTheDeviceWhenTheWorkCompletes) {
  Rig rig;
  const int r = rig.world->rank();
  std::vector<float> dev = rank_values(r, 12, 2), host = dev;
  const std::vector<float> before = dev;
  WorkPtr work = rig.staged.all_reduce(device_view(dev), ReduceOp::kSum);
  rig.world->all_reduce(host_view(host), ReduceOp::kSum)->wait();
  // The collective ran on staging: the device bytes change only at completion.
  while (!work->is_completed()) {
  }
  EXPECT_EQ(dev, host);
  work->wait();  // a second completion copies nothing more
  // One rank: the in-place call moves nothing and is not staged at all.
  EXPECT_EQ(rig.staging->to_device, rig.world->size() == 1 ? 0 : 1);
  if (rig.world->size() > 1) {
    EXPECT_NE(dev, before);
  }

  std::vector<float> b = rank_values(r, 9, 3);
  const std::vector<float> root_values = rank_values(0, 9, 3);
  rig.staged.broadcast(device_view(b), 0)->wait();
  EXPECT_EQ(b, root_values);
}

TEST(HostStagedProcessGroup, HostViewsPassStraightThrough) {
  Rig rig;
  std::vector<float> host = rank_values(rig.world->rank(), 8, 4);
  rig.staged.all_reduce(host_view(host), ReduceOp::kMax)->wait();
  EXPECT_EQ(rig.staging->to_host + rig.staging->to_device + rig.staging->allocations, 0);
}

TEST(HostStagedProcessGroup, StagingIsReusedAcrossIterations) {
  Rig rig;
  const int p = rig.world->size(), r = rig.world->rank();
  const std::size_t shard = 16;
  std::vector<std::vector<float>> buckets = {
      rank_values(r, shard * p, 5), rank_values(r, 2 * shard * p, 6), rank_values(r, shard * p, 7)};
  std::size_t after_first = 0;
  for (int iteration = 0; iteration < 4; ++iteration) {
    std::vector<WorkPtr> works;  // three buckets in flight at once, as DDP issues them
    for (auto& b : buckets) {
      const TensorView d = device_view(b);
      const std::int64_t s = d.numel / p;
      works.push_back(rig.staged.reduce_scatter(d.slice(s * r, s), d, ReduceOp::kSum));
    }
    for (auto& w : works) w->wait();
    if (iteration == 0) after_first = rig.staged.pool().allocated();
  }
  const int expected = p == 1 ? 0 : 3;  // one rank: in place, nothing staged
  EXPECT_EQ(after_first, static_cast<std::size_t>(expected));
  EXPECT_EQ(rig.staged.pool().allocated(), after_first);
  EXPECT_EQ(rig.staging->allocations, expected);
}

TEST(HostStagedProcessGroup, TheMpiGroupRefusesDeviceViews) {
  Rig rig;
  std::vector<float> v(4, 1.0f);
  try {
    rig.world->all_reduce(device_view(v), ReduceOp::kSum)->wait();
    ADD_FAILURE() << "a device view reached MPI";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("CUDA device 0"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace shardwise
