// ParamAndGradBuffer on injected memory: its storage comes from the memory it is given, every view
// it hands out carries that memory's device, and zeroing / bucket scaling go through the memory;
// host-only element code refuses device views by name.
#include <gtest/gtest.h>

#include <vector>

#include "ddp_test_support.hpp"
#include "shardwise/ddp/param_and_grad_buffer.hpp"

namespace shardwise {
namespace {

using testing_support::expect_error;
using testing_support::make_param;
using testing_support::pack_layout;

// Host bytes tagged as CUDA device 3, recording what DDP asks of it.
class RecordingMemory final : public BufferMemory {
 public:
  int device() const override { return 3; }
  std::shared_ptr<std::byte> allocate_zeroed(std::size_t nbytes) const override {
    allocated.push_back(nbytes);
    return host_buffer_memory()->allocate_zeroed(nbytes);
  }
  void zero(TensorView view) const override {
    EXPECT_EQ(view.device, 3);
    zeroed.push_back(view.numel);
  }
  void scale(TensorView view, double factor) const override {
    EXPECT_EQ(view.device, 3);
    scaled.push_back({view.numel, factor});
  }
  mutable std::vector<std::size_t> allocated;
  mutable std::vector<std::int64_t> zeroed;
  mutable std::vector<std::pair<std::int64_t, double>> scaled;
};

TEST(BufferMemory, BuffersLiveWhereTheirMemorySaysAndAskItToZeroAndScale) {
  const ParamList params = {make_param("a", {4, 3}, DType::kBFloat16),
                            make_param("b", {5}, DType::kBFloat16)};
  const BufferKey key{DType::kBFloat16, DType::kFloat32, false, false};
  auto memory = std::make_shared<RecordingMemory>();
  ParamAndGradBuffer buffer(params, key, pack_layout(params, {{1}, {0}}, 2), 0.5, memory);
  ASSERT_EQ(memory->allocated.size(), 2u);
  EXPECT_EQ(memory->allocated[0], static_cast<std::size_t>(buffer.numel()) * 2);  // bf16 params
  EXPECT_EQ(memory->allocated[1], static_cast<std::size_t>(buffer.numel()) * 4);  // fp32 grads
  EXPECT_EQ(buffer.param_data().device, 3);
  EXPECT_EQ(buffer.grad_view(0).device, 3);
  EXPECT_EQ(buffer.buckets()[1].grad_shard(1).device, 3);
  EXPECT_EQ(buffer.buckets()[0].param_data.device, 3);

  buffer.zero_grad();
  EXPECT_EQ(memory->zeroed, std::vector<std::int64_t>{buffer.numel()});
  buffer.scale_bucket_grad(1, 0.25);
  ASSERT_EQ(memory->scaled.size(), 1u);
  EXPECT_EQ(memory->scaled[0].first, buffer.buckets()[1].numel());
  EXPECT_EQ(memory->scaled[0].second, 0.25);
}

TEST(BufferMemory, HostElementCodeRefusesDeviceViews) {
  std::vector<float> bytes(4, 1.0f);
  const TensorView device{bytes.data(), 4, DType::kFloat32, 1};
  expect_error<InvalidArgument>([&] { scale_elements(device, 2.0); }, {"CUDA device 1"});
  expect_error<InvalidArgument>([&] { host_buffer_memory()->zero(device); }, {"CUDA device 1"});
  EXPECT_EQ(bytes, std::vector<float>(4, 1.0f));
}

}  // namespace
}  // namespace shardwise
