// Every collective of the NCCL group, in fp32 / bf16 / fp16, against a host reference computed
// from every rank's inputs. The inputs are multiples of 1/4 in [-8, 8], so sums over a few ranks
// are exact in every dtype and any reduction order NCCL picks gives the reference's bits; AVG
// divides by the group size, exact for 1, 2 and 4 ranks and within a rounding otherwise.
#include <chrono>
#include <cmath>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "nccl/mpi/nccl_test_support.hpp"
#include "shardwise/comm/traffic_model.hpp"

namespace shardwise {
namespace {

using nccl_test::DeviceArray;
using nccl_test::exact_values;

constexpr DType kFloatTypes[] = {DType::kFloat32, DType::kBFloat16, DType::kFloat16};
constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax};

const char* op_name(ReduceOp op) {
  return op == ReduceOp::kSum ? "sum" : op == ReduceOp::kAvg ? "avg" : "max";
}

// Elements [offset, offset + n) of the reduction over every rank's exact_values(rank, total, seed).
std::vector<float> reference_reduce(ReduceOp op, int ranks, std::int64_t total, int seed,
                                    std::int64_t offset, std::int64_t n) {
  std::vector<float> out(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    double sum = 0;
    float max = -INFINITY;
    for (int r = 0; r < ranks; ++r) {
      const float v = exact_values(r, total, seed)[static_cast<std::size_t>(offset + i)];
      sum += v;
      max = std::max(max, v);
    }
    out[static_cast<std::size_t>(i)] = op == ReduceOp::kMax   ? max
                                       : op == ReduceOp::kSum ? static_cast<float>(sum)
                                                              : static_cast<float>(sum / ranks);
  }
  return out;
}

// Exact, except AVG over a group size that is not a power of two (one rounding of the dtype).
void expect_reduced(const std::vector<float>& got, const std::vector<float>& want, DType dtype,
                    ReduceOp op, int ranks, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  const bool exact = op != ReduceOp::kAvg || (ranks & (ranks - 1)) == 0;
  const double ulp = dtype == DType::kFloat32    ? 0x1p-23
                     : dtype == DType::kBFloat16 ? 0x1p-7
                                                 : 0x1p-10;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double allowed = exact ? 0.0 : 2 * ulp * std::abs(want[i]) + 1e-6;
    ASSERT_LE(std::abs(got[i] - want[i]), allowed)
        << what << " element " << i << ": " << got[i] << " vs " << want[i];
  }
}

std::string label(DType dtype, ReduceOp op) { return str_cat(dtype_name(dtype), " ", op_name(op)); }

class NcclCollectives : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    world_ = init_mpi_world();
    if (nccl_test::visible_gpus() == 0) return;
    if (!every_rank_has_own_gpu(world_, nccl_test::device_of_rank(world_->rank()))) return;
    group_ = std::make_shared<NcclProcessGroup>(world_, nccl_test::device_of_rank(world_->rank()));
  }
  static void TearDownTestSuite() { group_.reset(); }
  void SetUp() override {
    SW_SKIP_WITHOUT_OWN_GPUS(world_);
    ASSERT_NE(group_, nullptr);
  }

  static int device() { return group_->device(); }
  static inline ProcessGroupPtr world_;
  static inline std::shared_ptr<NcclProcessGroup> group_;
  int p = world_->size();
  int me = world_->rank();
};

TEST_F(NcclCollectives, AllReduceEveryDtypeAndOp) {
  const std::int64_t n = 1237;
  int seed = 0;
  for (DType dtype : kFloatTypes) {
    for (ReduceOp op : kOps) {
      ++seed;
      DeviceArray buffer(dtype, n, device());
      buffer.upload(exact_values(me, n, seed));
      group_->all_reduce(buffer.view(), op)->wait();
      expect_reduced(buffer.download(), reference_reduce(op, p, n, seed, 0, n), dtype, op, p,
                     label(dtype, op));
    }
  }
}

TEST_F(NcclCollectives, ReduceScatterOutOfPlaceAndInPlace) {
  const std::int64_t shard = 311;
  int seed = 20;
  for (DType dtype : kFloatTypes) {
    for (ReduceOp op : kOps) {
      ++seed;
      const auto input_values = exact_values(me, p * shard, seed);
      const auto want = reference_reduce(op, p, p * shard, seed, me * shard, shard);
      DeviceArray input(dtype, p * shard, device());
      DeviceArray output(dtype, shard, device());
      input.upload(input_values);
      group_->reduce_scatter(output.view(), input.view(), op)->wait();
      expect_reduced(output.download(), want, dtype, op, p, "out of place " + label(dtype, op));
      const TensorView own = input.view().slice(me * shard, shard);
      group_->reduce_scatter(own, input.view(), op)->wait();
      const auto in_place = input.download();
      expect_reduced(
          std::vector<float>(in_place.begin() + me * shard, in_place.begin() + (me + 1) * shard),
          want, dtype, op, p, "in place " + label(dtype, op));
    }
  }
}

// The scale is folded into NCCL's reduction: each rank's input times float(scale), summed; the
// input is left as it was.
TEST_F(NcclCollectives, ReduceScatterScaledFoldsTheScaleIn) {
  const std::int64_t shard = 257;
  for (double scale : {0.25, 1.0 / 3.0, 1.0}) {
    const auto values = exact_values(me, p * shard, 7);
    DeviceArray input(DType::kFloat32, p * shard, device());
    DeviceArray output(DType::kFloat32, shard, device());
    input.upload(values);
    group_->reduce_scatter_scaled(output.view(), input.view(), scale)->wait();
    const auto got = output.download();
    const float f = static_cast<float>(scale);
    for (std::int64_t i = 0; i < shard; ++i) {
      double want = 0;
      for (int r = 0; r < p; ++r) {
        want += exact_values(r, p * shard, 7)[static_cast<std::size_t>(me * shard + i)] * f;
      }
      // Each product rounds to fp32 once, then p - 1 fp32 additions.
      ASSERT_NEAR(got[static_cast<std::size_t>(i)], want, 8 * p * 0x1p-24 * (std::abs(want) + 8))
          << "scale " << scale << " element " << i;
    }
    EXPECT_EQ(input.download(), values) << "input changed (scale " << scale << ")";
  }
  DeviceArray bf16(DType::kBFloat16, p * 4, device());
  DeviceArray bf16_out(DType::kBFloat16, 4, device());
  EXPECT_THROW(group_->reduce_scatter_scaled(bf16_out.view(), bf16.view(), 0.5)->wait(),
               InvalidArgument);
}

TEST_F(NcclCollectives, AllGatherOutOfPlaceAndInPlace) {
  const std::int64_t shard = 173;
  for (DType dtype : kFloatTypes) {
    std::vector<float> want;
    for (int r = 0; r < p; ++r) {
      const auto v = exact_values(r, shard, 3);
      want.insert(want.end(), v.begin(), v.end());
    }
    DeviceArray input(dtype, shard, device());
    DeviceArray output(dtype, p * shard, device());
    input.upload(exact_values(me, shard, 3));
    group_->all_gather(output.view(), input.view())->wait();
    EXPECT_EQ(output.download(), want) << "out of place " << dtype_name(dtype);

    DeviceArray whole(dtype, p * shard, device());
    std::vector<float> mine(static_cast<std::size_t>(p * shard), 99.0f);
    const auto own = exact_values(me, shard, 3);
    std::copy(own.begin(), own.end(), mine.begin() + me * shard);
    whole.upload(mine);
    group_->all_gather(whole.view(), whole.view().slice(me * shard, shard))->wait();
    EXPECT_EQ(whole.download(), want) << "in place " << dtype_name(dtype);
  }
}

// Uneven blocks, one of them empty when there are two ranks or more.
TEST_F(NcclCollectives, AllGatherVUnevenCounts) {
  std::vector<std::int64_t> counts;
  std::vector<float> want;
  for (int r = 0; r < p; ++r) {
    counts.push_back(r == 1 ? 0 : 50 + 31 * r);
    const auto v = exact_values(r, counts.back(), 5);
    want.insert(want.end(), v.begin(), v.end());
  }
  for (DType dtype : kFloatTypes) {
    DeviceArray input(dtype, counts[static_cast<std::size_t>(me)], device());
    DeviceArray output(dtype, static_cast<std::int64_t>(want.size()), device());
    input.upload(exact_values(me, counts[static_cast<std::size_t>(me)], 5));
    group_->all_gather_v(output.view(), input.view(), counts)->wait();
    EXPECT_EQ(output.download(), want) << dtype_name(dtype);
  }
  DeviceArray output(DType::kFloat32, static_cast<std::int64_t>(want.size()), device());
  DeviceArray wrong(DType::kFloat32, counts[static_cast<std::size_t>(me)] + 1, device());
  EXPECT_THROW(group_->all_gather_v(output.view(), wrong.view(), counts)->wait(), InvalidArgument);
}

TEST_F(NcclCollectives, BroadcastFromEveryRoot) {
  const std::int64_t n = 999;
  for (DType dtype : kFloatTypes) {
    for (int root = 0; root < p; ++root) {
      DeviceArray buffer(dtype, n, device());
      buffer.upload(exact_values(me, n, 11));
      group_->broadcast(buffer.view(), root)->wait();
      EXPECT_EQ(buffer.download(), exact_values(root, n, 11))
          << dtype_name(dtype) << " root " << root;
    }
  }
}

// Each rank sends to the next and receives from the previous; even ranks send first, odd ranks
// receive first, so the blocking NCCL pairs always meet.
TEST_F(NcclCollectives, SendRecvAroundTheRing) {
  DeviceArray self(DType::kFloat32, 4, device());
  EXPECT_THROW(group_->send(self.view(), me, 0)->wait(), InvalidArgument);
  if (p < 2) GTEST_SKIP() << "send/recv between ranks needs two GPUs (one rank here)";
  const std::int64_t n = 4099;
  const int next = (me + 1) % p;
  const int prev = (me + p - 1) % p;
  for (DType dtype : kFloatTypes) {
    DeviceArray out(dtype, n, device());
    DeviceArray in(dtype, n, device());
    out.upload(exact_values(me, n, 13));
    WorkPtr sent;
    WorkPtr received;
    if (me % 2 == 0) {
      sent = group_->send(out.view(), next, 7);
      received = group_->recv(in.view(), prev, 7);
    } else {
      received = group_->recv(in.view(), prev, 7);
      sent = group_->send(out.view(), next, 7);
    }
    sent->wait();
    received->wait();
    EXPECT_EQ(in.download(), exact_values(prev, n, 13)) << dtype_name(dtype);
  }
}

TEST_F(NcclCollectives, BarrierCompletes) {
  for (int i = 0; i < 3; ++i) {
    WorkPtr work = group_->barrier();
    work->wait();
    EXPECT_TRUE(work->is_completed());
  }
}

// The same per-rank volumes as the MPI group (traffic_model.hpp), and GPU time for each kind.
TEST_F(NcclCollectives, TrafficFollowsTheModel) {
  group_->reset_traffic();
  const std::int64_t shard = 1024;
  DeviceArray big(DType::kBFloat16, p * shard, device());
  DeviceArray small(DType::kBFloat16, shard, device());
  big.upload(exact_values(me, p * shard, 1));
  group_->all_reduce(big.view(), ReduceOp::kSum)->wait();
  group_->reduce_scatter(small.view(), big.view(), ReduceOp::kSum)->wait();
  group_->all_gather(big.view(), small.view())->wait();
  group_->broadcast(small.view(), 0)->wait();
  const TrafficCounters t = group_->traffic();
  const std::int64_t bytes = p * shard * 2;
  EXPECT_EQ(t.bytes_sent.at(CollectiveKind::kAllReduce), all_reduce_traffic(bytes, p).sent);
  EXPECT_EQ(t.bytes_received.at(CollectiveKind::kReduceScatter),
            reduce_scatter_traffic(bytes, p).received);
  EXPECT_EQ(t.bytes_sent.at(CollectiveKind::kAllGather), all_gather_traffic(bytes, p).sent);
  EXPECT_EQ(t.bytes_received.at(CollectiveKind::kBroadcast),
            broadcast_traffic(shard * 2, p, me, 0).received);
  for (CollectiveKind kind : {CollectiveKind::kAllReduce, CollectiveKind::kReduceScatter,
                              CollectiveKind::kAllGather, CollectiveKind::kBroadcast}) {
    EXPECT_EQ(t.calls.at(kind), 1) << collective_kind_name(kind);
    EXPECT_GT(t.busy_seconds.at(kind), 0.0) << collective_kind_name(kind);
  }
  group_->reset_traffic();
  EXPECT_EQ(group_->traffic().total_sent(), 0);
}

TEST_F(NcclCollectives, HostAndForeignViewsAreRefused) {
  std::vector<float> host(static_cast<std::size_t>(p * 8), 1.0f);
  const TensorView host_view{host.data(), p * 8, DType::kFloat32};
  try {
    group_->all_reduce(host_view, ReduceOp::kSum)->wait();
    FAIL() << "a host view was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("host memory"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("all_reduce"), std::string::npos) << e.what();
  }
  DeviceArray output(DType::kFloat32, 8, device());
  EXPECT_THROW(group_->reduce_scatter(output.view(), host_view, ReduceOp::kSum)->wait(),
               InvalidArgument);
  TensorView other_gpu = output.view();
  other_gpu.device = device() + 1;
  EXPECT_THROW(group_->broadcast(other_gpu, 0)->wait(), InvalidArgument);
  EXPECT_THROW(wait_on_stream(group_->broadcast(other_gpu, 0), nullptr), InvalidArgument);
}

// An operation waits for what is queued on the group's compute stream when it is issued: here a
// copy held back 200 ms by a host callback. Without that wait NCCL would reduce stale values.
TEST_F(NcclCollectives, OperationsWaitForTheComputeStreamAndWaitOnStreamOrdersConsumers) {
  const std::int64_t n = 4096;
  cudaStream_t compute = nullptr;
  cudaStream_t consumer = nullptr;
  SW_CUDA_OK(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking));
  SW_CUDA_OK(cudaStreamCreateWithFlags(&consumer, cudaStreamNonBlocking));
  DeviceArray buffer(DType::kFloat32, n, device());
  buffer.upload(std::vector<float>(static_cast<std::size_t>(n), 0.0f));
  const auto values = exact_values(me, n, 17);
  float* pinned = nullptr;
  SW_CUDA_OK(cudaMallocHost(reinterpret_cast<void**>(&pinned), n * sizeof(float)));
  std::copy(values.begin(), values.end(), pinned);
  SW_CUDA_OK(cudaLaunchHostFunc(
      compute, [](void*) { std::this_thread::sleep_for(std::chrono::milliseconds(200)); },
      nullptr));
  SW_CUDA_OK(cudaMemcpyAsync(buffer.view().data, pinned, n * sizeof(float), cudaMemcpyHostToDevice,
                             compute));
  group_->set_compute_stream(compute);
  WorkPtr work = group_->all_reduce(buffer.view(), ReduceOp::kSum);
  group_->set_compute_stream(nullptr);
  // The consumer reads the result on its own stream, ordered by the work's event alone.
  wait_on_stream(work, consumer);
  std::vector<float> got(static_cast<std::size_t>(n));
  SW_CUDA_OK(cudaMemcpyAsync(got.data(), buffer.view().data, n * sizeof(float),
                             cudaMemcpyDeviceToHost, consumer));
  SW_CUDA_OK(cudaStreamSynchronize(consumer));
  EXPECT_EQ(got, reference_reduce(ReduceOp::kSum, p, n, 17, 0, n));
  work->wait();
  cudaFreeHost(pinned);
  cudaStreamDestroy(compute);
  cudaStreamDestroy(consumer);
}

// Many operations in flight at once (as DDP's buckets are), waited for in reverse order and
// from another thread: each Work follows its own event, and every result is right.
TEST_F(NcclCollectives, ManyOperationsInFlightCompleteIndependently) {
  constexpr int kOperations = 24;
  const std::int64_t shard = 2048;
  std::vector<std::unique_ptr<DeviceArray>> inputs;
  std::vector<std::unique_ptr<DeviceArray>> outputs;
  std::vector<WorkPtr> works;
  for (int k = 0; k < kOperations; ++k) {
    inputs.push_back(std::make_unique<DeviceArray>(DType::kFloat32, p * shard, device()));
    outputs.push_back(std::make_unique<DeviceArray>(DType::kFloat32, shard, device()));
    inputs.back()->upload(exact_values(me, p * shard, 40 + k));
  }
  for (int k = 0; k < kOperations; ++k) {
    works.push_back(group_->reduce_scatter_scaled(outputs[k]->view(), inputs[k]->view(), 0.5));
  }
  std::thread waiter([&] {
    for (int k = kOperations - 1; k >= kOperations / 2; --k) works[k]->wait();
  });
  for (int k = kOperations / 2 - 1; k >= 0; --k) works[k]->wait();
  waiter.join();
  for (int k = 0; k < kOperations; ++k) {
    EXPECT_TRUE(works[k]->is_completed());
    std::vector<float> want =
        reference_reduce(ReduceOp::kSum, p, p * shard, 40 + k, me * shard, shard);
    for (float& v : want) v *= 0.5f;  // exact: a power of two
    EXPECT_EQ(outputs[k]->download(), want) << "operation " << k;
  }
}

// Sub-groups (here: even and odd world ranks) get communicators of their own.
TEST_F(NcclCollectives, SubgroupsHaveTheirOwnCommunicator) {
  ProcessGroupPtr half = split_group(world_, me % 2, me, "parity");
  NcclProcessGroup sub(half, device());
  EXPECT_EQ(sub.name(), "parity");
  EXPECT_EQ(sub.size(), (p + 1 - me % 2) / 2);
  const std::int64_t n = 300;
  DeviceArray buffer(DType::kFloat32, n, device());
  buffer.upload(exact_values(me, n, 19));
  sub.all_reduce(buffer.view(), ReduceOp::kSum)->wait();
  std::vector<float> want(static_cast<std::size_t>(n), 0.0f);
  for (int r = me % 2; r < p; r += 2) {
    const auto v = exact_values(r, n, 19);
    for (std::size_t i = 0; i < want.size(); ++i) want[i] += v[i];
  }
  EXPECT_EQ(buffer.download(), want);
}

// make_nccl_parallel_groups: one NCCL group per host group, each reducing over its own ranks
// (tp = 2 when there are two ranks or more, so dp and tp differ).
TEST_F(NcclCollectives, ParallelGroupsEachGetACommunicator) {
  ParallelSizes sizes;
  sizes.tp = p % 2 == 0 ? 2 : 1;
  const ParallelGroups host = make_parallel_groups(world_, sizes);
  const ParallelGroups nccl = make_nccl_parallel_groups(host, device());
  EXPECT_EQ(nccl.sizes.dp, host.sizes.dp);
  for (const auto& [host_group, nccl_group] :
       {std::pair{host.data_parallel, nccl.data_parallel},
        std::pair{host.tensor_parallel, nccl.tensor_parallel}, std::pair{host.world, nccl.world}}) {
    ASSERT_NE(nccl_group, nullptr);
    EXPECT_EQ(nccl_group->name(), host_group->name());
    EXPECT_EQ(nccl_group->size(), host_group->size());
    EXPECT_EQ(nccl_group->rank(), host_group->rank());
    // Sum of every member's world rank + 1, on the device and on the host group.
    DeviceArray value(DType::kFloat32, 1, device());
    value.upload({static_cast<float>(me + 1)});
    nccl_group->all_reduce(value.view(), ReduceOp::kSum)->wait();
    float want = static_cast<float>(me + 1);
    host_group->all_reduce(TensorView{&want, 1, DType::kFloat32}, ReduceOp::kSum)->wait();
    EXPECT_EQ(value.download(), std::vector<float>{want}) << nccl_group->name();
  }
}

}  // namespace
}  // namespace shardwise
