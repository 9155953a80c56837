// The device wiring of DDP and the layer-wise optimizer chain, checked on the CPU: buffer memory,
// shard math and staging are stand-ins that keep the bytes in host memory but tag every view with
// CUDA device 0, so every host-only path that met a buffer view would refuse it (the MPI group,
// scale_elements) and the stand-ins count what the injected interfaces were asked to do. With the
// host math behind them the results must equal the host path's bit for bit, which checks that the
// layout, bucketing, dispatch order, ownership and statistics are the ones the host path uses.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "shardwise/comm/host_staged_process_group.hpp"
#include "shardwise/comm/mpi_process_group.hpp"
#include "shardwise/layout/model_zoo.hpp"
#include "shardwise/optim/data_parallel_setup.hpp"
#include "shardwise/optim/layer_wise_data_parallel.hpp"
#include "shardwise/optim/optimizer_state_view.hpp"

namespace shardwise::optim {
namespace {

constexpr int kTaggedDevice = 0;

TensorView untagged(TensorView v) {
  v.device = TensorView::kHostMemory;
  return v;
}

class TaggedBufferMemory final : public BufferMemory {
 public:
  int device() const override { return kTaggedDevice; }
  std::shared_ptr<std::byte> allocate_zeroed(std::size_t nbytes) const override {
    return host_buffer_memory()->allocate_zeroed(nbytes);
  }
  void zero(TensorView view) const override {
    EXPECT_EQ(view.device, kTaggedDevice);
    host_buffer_memory()->zero(untagged(view));
  }
  void scale(TensorView view, double factor) const override {
    EXPECT_EQ(view.device, kTaggedDevice);
    host_buffer_memory()->scale(untagged(view), factor);
  }
};

// Host math, reporting device 0, counting its calls, and copying state as a device would.
class TaggedShardMath final : public ShardMath {
 public:
  int device() const override { return kTaggedDevice; }
  double sum_of_squares(const float* values, std::int64_t n) const override {
    ++statistics;
    return host().sum_of_squares(values, n);
  }
  std::int64_t count_zeros(const float* values, std::int64_t n) const override {
    ++statistics;
    return host().count_zeros(values, n);
  }
  void scale(float* values, std::int64_t n, float coeff) const override {
    ++scalings;
    host().scale(values, n, coeff);
  }
  FloatArray zeros(std::int64_t n) const override { return host().zeros(n); }
  FloatArray adopt(std::vector<float>&& values) const override {
    return host().adopt(std::vector<float>(values));  // a copy, as into device memory
  }
  std::vector<float> to_host(const float* values, std::int64_t n) const override {
    ++state_copies;
    return host().to_host(values, n);
  }
  std::span<const float> view_values(const FloatArray& array,
                                     OptimizerStateView& view) const override {
    return view.hold(to_host(array.data(), array.size()));
  }
  void widen(const TensorView& model, float* main) const override {
    EXPECT_EQ(model.device, kTaggedDevice);
    ++widenings;
    host().widen(untagged(model), main);
  }
  void narrow(const float* main, const TensorView& model) const override {
    EXPECT_EQ(model.device, kTaggedDevice);
    ++narrowings;
    host().narrow(main, untagged(model));
  }
  void adamw_update(const AdamWStepScalars& s, float* param, const float* grad, float* exp_avg,
                    float* exp_avg_sq, std::int64_t n) const override {
    ++adamw_updates;
    host().adamw_update(s, param, grad, exp_avg, exp_avg_sq, n);
  }
  std::unique_ptr<MuonMatrixStep> make_muon_step(const MuonOptions& options) const override {
    ++muon_steppers;
    return host().make_muon_step(options);
  }

  mutable int statistics = 0, scalings = 0, state_copies = 0, adamw_updates = 0, muon_steppers = 0,
              widenings = 0, narrowings = 0;

 private:
  static const ShardMath& host() { return *host_shard_math(); }
};

class TaggedStaging final : public DeviceStaging {
 public:
  std::shared_ptr<std::byte> allocate_host(std::size_t nbytes) override {
    return std::shared_ptr<std::byte>(new std::byte[nbytes], std::default_delete<std::byte[]>());
  }
  void copy_to_host(void* host, const TensorView& device) override {
    EXPECT_EQ(device.device, kTaggedDevice);
    std::memcpy(host, device.data, device.nbytes());
  }
  void copy_to_device(const TensorView& device, const void* host) override {
    EXPECT_EQ(device.device, kTaggedDevice);
    std::memcpy(device.data, host, device.nbytes());
  }
};

ParamList injected_test_model(DType dtype = DType::kFloat32) {
  TransformerConfig c;
  c.name = "tagged-memory";
  c.num_layers = 2;
  c.hidden_size = 32;
  c.ffn_hidden_size = 48;
  c.num_attention_heads = 4;
  c.vocab_size = 80;
  c.dtype = dtype;
  return generate_transformer_params(c);
}

void run_steps(DistributedDataParallel& ddp, Optimizer& optimizer, int rank) {
  for (ParamId id = 0; id < ddp.params().size(); ++id) {
    const TensorView v = ddp.param(id);
    // 16-bit params start at zero: their fp32 main copies were taken when the optimizer was built.
    if (v.dtype != DType::kFloat32) continue;
    for (std::int64_t i = 0; i < v.numel; ++i) {
      v.as<float>()[i] = 0.05f * std::sin(0.37f * static_cast<float>(i) + static_cast<float>(id));
    }
  }
  for (int step = 0; step < 3; ++step) {
    ddp.zero_grad_buffer();
    for (ParamId id = ddp.params().size(); id-- > 0;) {
      const TensorView g = ddp.main_grad(id);
      for (std::int64_t i = 0; i < g.numel; ++i) {
        g.as<float>()[i] = (i % 11 == 3) ? 0.0f
                                         : std::cos(0.11f * static_cast<float>(i * (rank + 2)) +
                                                    0.7f * static_cast<float>(id + step));
      }
      ddp.register_grad_ready(id);
    }
    ddp.finish_grad_sync();
    const StepResult r = optimizer.step();
    EXPECT_TRUE(r.stepped);
    EXPECT_LT(r.clip_coeff, 1.0);
  }
}

std::vector<unsigned char> injected_param_bytes(const DistributedDataParallel& ddp) {
  std::vector<unsigned char> out;
  for (ParamId id = 0; id < ddp.params().size(); ++id) {
    const TensorView v = ddp.param(id);
    const auto* p = static_cast<const unsigned char*>(v.data);
    out.insert(out.end(), p, p + v.nbytes());
  }
  return out;
}

// Runs the host path and the tagged device path on a model of `dtype` params and requires the same
// bytes; returns the tagged math, whose counters say what it was asked to do.
std::shared_ptr<TaggedShardMath> expect_tagged_path_equals_host_path(DType dtype) {
  const ProcessGroupPtr world = init_mpi_world();
  const ParamList params = injected_test_model(dtype);
  DistributedDataParallelConfig config;
  config.overlap_grad_reduce = true;
  config.bucket_size = 1500;  // several bucket groups
  MuonOptions muon;
  muon.lr = 0.01;
  AdamWOptions adamw;
  adamw.lr = 0.003;
  const StepOptions step_options{0.5, true};

  auto host_ddp = std::move(
      wrap_with_ddp({params}, OptimizerKind::kLayerWise, config, DataParallelGroups{world, nullptr})
          .front());
  auto host_optimizer =
      make_optimizer(OptimizerKind::kLayerWise, {host_ddp.get()}, muon, adamw, world);
  host_optimizer->set_step_options(step_options);

  auto math = std::make_shared<TaggedShardMath>();
  auto staged = std::make_shared<HostStagedProcessGroup>(world, std::make_shared<TaggedStaging>());
  DataParallelOptimizer tagged = make_layer_wise_data_parallel(
      params, host_ddp->layout(), host_ddp->config(), DataParallelGroups{staged, nullptr}, world,
      muon, adamw, std::make_shared<TaggedBufferMemory>(), math);
  tagged.optimizer->set_step_options(step_options);
  EXPECT_GT(tagged.ddp->bucket_groups().size(), 2u);
  for (ParamId id = 0; id < params.size(); ++id) {
    EXPECT_EQ(tagged.ddp->param(id).device, kTaggedDevice);
    EXPECT_EQ(tagged.ddp->param(id).dtype, dtype);
    EXPECT_EQ(tagged.ddp->main_grad(id).device, kTaggedDevice);
  }

  run_steps(*host_ddp, *host_optimizer, world->rank());
  run_steps(*tagged.ddp, *tagged.optimizer, world->rank());
  EXPECT_EQ(tagged.ddp->grad_dispatch_log(), host_ddp->grad_dispatch_log());
  EXPECT_TRUE(injected_param_bytes(*tagged.ddp) == injected_param_bytes(*host_ddp));
  EXPECT_EQ(tagged.optimizer->state_dict(), host_optimizer->state_dict());
  if (world->size() > 1) {  // one rank: nothing is staged
    EXPECT_GT(staged->pool().allocated(), 0u);
  }
  return math;
}

TEST(InjectedMemory, TaggedDevicePathEqualsTheHostPathBitForBit) {
  const std::shared_ptr<TaggedShardMath> math =
      expect_tagged_path_equals_host_path(DType::kFloat32);
  // The injected interfaces did the work: statistics, clipping, both updates, the state copies.
  EXPECT_GT(math->statistics, 0);
  EXPECT_GT(math->scalings, 0);
  EXPECT_EQ(math->muon_steppers, 1);
  EXPECT_GT(math->adamw_updates, 0);
  EXPECT_GT(math->state_copies, 0);
  EXPECT_EQ(math->widenings + math->narrowings, 0);  // fp32 main params are the buffer itself
}

// bf16 / fp16 buffers: the fp32 main copies are taken and rounded back by the injected math (on
// the device, the conversion kernels), and everything still equals the host path bit for bit.
TEST(InjectedMemory, SixteenBitParamsRoundThroughTheInjectedMath) {
  for (DType dtype : {DType::kBFloat16, DType::kFloat16}) {
    const std::shared_ptr<TaggedShardMath> math = expect_tagged_path_equals_host_path(dtype);
    EXPECT_GT(math->widenings, 0) << dtype_name(dtype);
    EXPECT_GT(math->narrowings, 0) << dtype_name(dtype);
    EXPECT_GT(math->adamw_updates, 0) << dtype_name(dtype);
  }
}

TEST(InjectedMemory, HostMathRefusesDeviceBuffers) {
  const ProcessGroupPtr world = init_mpi_world();
  const ParamList params = injected_test_model();
  DistributedDataParallelConfig config;
  auto host_ddp = std::move(
      wrap_with_ddp({params}, OptimizerKind::kLayerWise, config, DataParallelGroups{world, nullptr})
          .front());
  auto staged = std::make_shared<HostStagedProcessGroup>(world, std::make_shared<TaggedStaging>());
  try {
    make_layer_wise_data_parallel(params, host_ddp->layout(), host_ddp->config(),
                                  DataParallelGroups{staged, nullptr}, world, {}, {},
                                  std::make_shared<TaggedBufferMemory>(), host_shard_math());
    ADD_FAILURE() << "host math accepted device buffers";
  } catch (const InvalidArgument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("lives in CUDA device 0"), std::string::npos) << what;
    EXPECT_NE(what.find("runs on host memory"), std::string::npos) << what;
  }
}

TEST(InjectedMemory, DeviceBuffersOverAPlainMpiGroupAreRefused) {
  const ProcessGroupPtr world = init_mpi_world();
  const ParamList params = injected_test_model();
  DistributedDataParallelConfig config;
  auto host_ddp = std::move(
      wrap_with_ddp({params}, OptimizerKind::kLayerWise, config, DataParallelGroups{world, nullptr})
          .front());
  DataParallelOptimizer tagged = make_layer_wise_data_parallel(
      params, host_ddp->layout(), host_ddp->config(), DataParallelGroups{world, nullptr}, world, {},
      {}, std::make_shared<TaggedBufferMemory>(), std::make_shared<TaggedShardMath>());
  EXPECT_THROW(
      {
        for (ParamId id = params.size(); id-- > 0;) tagged.ddp->register_grad_ready(id);
        tagged.ddp->finish_grad_sync();
      },
      InvalidArgument);
}

}  // namespace
}  // namespace shardwise::optim
