// Device-resident DDP + layer-wise optimizer chain against the host path, under mpirun with every
// rank on one GPU (ranks share it; collectives are host-staged MPI). A small transformer (2-D
// Muon weights and 1-D AdamW params, several buckets) takes a few steps with the same
// rank-dependent grads on both paths; clipping and the zero count are on.
//
// Tolerances, and why:
//  - The reduced grads are bit-identical: the staged group runs the host group's own
//    reduce-scatter on the same bytes.
//  - Grad norm: every x^2 is exact in fp64 on both sides, only the summation order differs, so
//    the relative difference is below 2(n-1)*2^-53 (n = elements per rank, < 2^16 here): 1e-10.
//    The zero count is exact.
//  - AdamW params: the fused kernel repeats the CPU's fp32 operations (no FMA), so they are
//    bit-identical whenever both paths clip with the same fp32 coefficient (the norms agree to
//    1e-10 relative, so the coefficient's float rounding almost never differs; when it does, the
//    update differs by about one fp32 rounding of the coefficient: 1e-6 relative of lr).
//  - Muon params: momentum is bit-identical; Newton–Schulz in fp32 with TF32 off differs only in
//    the GEMMs' summation order. tests/cuda/newton_schulz_cuda_test.cpp allows d*sqrt(k)*2^-12
//    relative (Frobenius) distance per orthogonalization (k the long side, d < 0.1 the bf16
//    sensitivity, ~16x above the expected d*sqrt(k)*2^-16). Grads do not depend on params here,
//    so per-step differences add up and never feed back: we allow kSteps * 0.1 * sqrt(k) * 2^-12
//    relative distance between the two paths' param changes over the run (weight decay is the
//    same on both and negligible next to the updates).
//
// bf16 / fp16 param buffers (fp32 main params in the optimizer's memory, rounded to nearest even
// into the buffer after each step, on the device by the conversion kernels):
//  - The main params are widened from the buffers when the optimizer is built, before the test
//    can write values, so 16-bit params start at zero on both paths (the conversion itself is
//    checked bit for bit in tests/cuda/mixed_precision_cuda_test.cpp).
//  - AdamW params: equal main params round to equal bits, so still bit-identical when the clip
//    coefficients agree; otherwise the fp32 bound above plus one 16-bit rounding step of the value
//    (2^-7 |x| for bf16, 2^-10 |x| for fp16, the spacing of the format at |x|; at least 2^-24,
//    fp16's subnormal spacing).
//  - Muon params: two round-to-nearest results differ by at most the difference of their inputs
//    plus each one's rounding error, u |x| (u = 2^-8 bf16, 2^-11 fp16), so the relative distance
//    of the changes grows by at most 2u: the fp32 bound plus 2^-7 (bf16) or 2^-10 (fp16).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "cuda/cuda_test_support.hpp"
#include "shardwise/comm/device_mapping.hpp"
#include "shardwise/comm/host_staged_process_group.hpp"
#include "shardwise/comm/mpi_process_group.hpp"
#include "shardwise/core/float_convert.hpp"
#include "shardwise/cuda/device_buffer.hpp"
#include "shardwise/cuda/device_data_parallel.hpp"
#include "shardwise/cuda/mxfp8_cuda.hpp"
#include "shardwise/layout/model_zoo.hpp"
#include "shardwise/optim/data_parallel_setup.hpp"
#include "shardwise/optim/layer_wise_distributed_optimizer.hpp"
#include "shardwise/optim/mixed_precision.hpp"

namespace shardwise {
namespace {

constexpr int kSteps = 3;

ParamList small_model(DType dtype = DType::kFloat32) {
  TransformerConfig c;
  c.name = "device-layer-wise";
  c.num_layers = 2;
  c.hidden_size = 64;
  c.ffn_hidden_size = 128;
  c.num_attention_heads = 4;
  c.vocab_size = 96;
  c.dtype = dtype;
  return generate_transformer_params(c);
}

int my_device(const ProcessGroupPtr& world) {
  const int local_rank = local_rank_from_environment().value_or(world->rank());
  return device_for_local_rank(local_rank, cuda::device_count(), DeviceSharing::kShareDevices);
}

std::vector<float> grad_values(ParamId id, std::int64_t n, int step, int rank) {
  std::vector<float> g(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    // Some exact zeros, so count_zeros has something to count.
    g[static_cast<std::size_t>(i)] =
        (i % 11 == 3) ? 0.0f
                      : std::cos(0.11f * static_cast<float>(i * (rank + 2)) +
                                 0.7f * static_cast<float>(id + static_cast<ParamId>(step)));
  }
  return g;
}

float initial_value(ParamId id, std::int64_t i) {
  return 0.05f * std::sin(0.37f * static_cast<float>(i) + static_cast<float>(id));
}

// The values of a host view (fp32, bf16 or fp16), widened exactly to fp32.
std::vector<float> host_values(const TensorView& v) {
  std::vector<float> out(static_cast<std::size_t>(v.numel));
  optim::copy_model_to_main(v, out);
  return out;
}

std::vector<float> device_values(const TensorView& v) {
  std::vector<std::byte> bytes(v.nbytes());
  cuda::copy_to_host(bytes.data(), v.data, v.nbytes());
  return host_values({bytes.data(), v.numel, v.dtype, TensorView::kHostMemory});
}

// The spacing of the param dtype's subnormals (fp16's matter at AdamW's step sizes), the absolute
// floor under rounding_step.
double smallest_step(DType dtype) { return dtype == DType::kFloat16 ? std::ldexp(1.0, -24) : 0.0; }

// Relative rounding step of the param dtype (0 for fp32, whose main params are the buffer).
double rounding_step(DType dtype) {
  switch (dtype) {
    case DType::kBFloat16:
      return std::ldexp(1.0, -7);
    case DType::kFloat16:
      return std::ldexp(1.0, -10);
    default:
      return 0.0;
  }
}

struct Paths {
  std::unique_ptr<DistributedDataParallel> host_ddp;
  std::unique_ptr<optim::Optimizer> host_optimizer;
  cuda::DeviceDataParallel device;
};

Paths make_paths(const ParamList& params, const ProcessGroupPtr& world, int device,
                 const optim::MuonOptions& muon, const optim::AdamWOptions& adamw) {
  DistributedDataParallelConfig config;
  config.overlap_grad_reduce = true;
  config.bucket_size = 6000;  // several buckets per buffer
  Paths p;
  auto ddps = optim::wrap_with_ddp({params}, OptimizerKind::kLayerWise, config,
                                   DataParallelGroups{world, nullptr});
  p.host_ddp = std::move(ddps.front());
  p.host_optimizer =
      optim::make_optimizer(OptimizerKind::kLayerWise, {p.host_ddp.get()}, muon, adamw, world);
  p.device =
      cuda::make_device_layer_wise(params, p.host_ddp->layout(), p.host_ddp->config(),
                                   DataParallelGroups{world, nullptr}, world, device, muon, adamw);
  const optim::StepOptions step_options{0.5, true};
  p.host_optimizer->set_step_options(step_options);
  p.device.optimizer->set_step_options(step_options);
  for (ParamId id = 0; id < params.size(); ++id) {
    const TensorView h = p.host_ddp->param(id);
    const TensorView d = p.device.ddp->param(id);
    EXPECT_EQ(d.device, device);
    if (h.dtype != DType::kFloat32) continue;  // 16-bit params start at zero (see the top)
    for (std::int64_t i = 0; i < h.numel; ++i) h.as<float>()[i] = initial_value(id, i);
    cuda::copy_to_device(d.data, h.data, h.nbytes());
  }
  return p;
}

class DeviceLayerWiseByDType : public ::testing::TestWithParam<DType> {};

TEST_P(DeviceLayerWiseByDType, StepsMatchTheHostPath) {
  SW_SKIP_WITHOUT_GPU();
  const ProcessGroupPtr world = init_mpi_world();
  const DType dtype = GetParam();
  const ParamList params = small_model(dtype);
  const double step16 = rounding_step(dtype);
  const auto start_value = [dtype](ParamId id, std::int64_t i) {
    return dtype == DType::kFloat32 ? static_cast<double>(initial_value(id, i)) : 0.0;
  };
  optim::MuonOptions muon;
  muon.lr = 0.01;
  optim::AdamWOptions adamw;
  adamw.lr = 0.003;
  Paths p = make_paths(params, world, my_device(world), muon, adamw);
  DistributedDataParallel& host = *p.host_ddp;
  DistributedDataParallel& dev = *p.device.ddp;
  ASSERT_GT(host.bucket_groups().size(), 2u) << "the test needs several bucket groups";
  ASSERT_EQ(dev.bucket_groups().size(), host.bucket_groups().size());

  bool float_coefficients_agree = true;
  for (int step = 0; step < kSteps; ++step) {
    host.zero_grad_buffer();
    dev.zero_grad_buffer();
    for (ParamId id = params.size(); id-- > 0;) {
      const TensorView h = host.main_grad(id);
      const std::vector<float> g = grad_values(id, h.numel, step, world->rank());
      std::copy(g.begin(), g.end(), h.as<float>());
      cuda::copy_to_device(dev.main_grad(id).data, g.data(), h.nbytes());
      host.register_grad_ready(id);
      dev.register_grad_ready(id);
    }
    host.finish_grad_sync();
    dev.finish_grad_sync();
    EXPECT_EQ(dev.grad_dispatch_log(), host.grad_dispatch_log());
    const optim::StepResult h = p.host_optimizer->step();
    const optim::StepResult d = p.device.optimizer->step();
    ASSERT_TRUE(h.stepped && d.stepped);
    EXPECT_NEAR(d.grad_norm, h.grad_norm, 1e-10 * h.grad_norm) << "step " << step;
    EXPECT_LT(h.clip_coeff, 1.0) << "clipping should be exercised";
    EXPECT_NEAR(d.clip_coeff, h.clip_coeff, 1e-10 * h.clip_coeff);
    EXPECT_EQ(d.num_zeros, h.num_zeros);
    EXPECT_GT(h.num_zeros.value_or(0), 0);
    float_coefficients_agree = float_coefficients_agree &&
                               static_cast<float>(d.clip_coeff) == static_cast<float>(h.clip_coeff);
  }

  int muon_params = 0, adamw_params = 0;
  for (ParamId id = 0; id < params.size(); ++id) {
    ASSERT_EQ(host.param(id).dtype, dtype);
    ASSERT_EQ(dev.param(id).dtype, dtype);
    const std::vector<float> h = host_values(host.param(id));
    const std::vector<float> d = device_values(dev.param(id));
    const auto n = static_cast<std::int64_t>(h.size());
    if (is_managed_by_layer_wise_optimizer(params[id])) {
      ++muon_params;
      double diff = 0.0, change = 0.0;  // of the param changes over the run
      for (std::int64_t i = 0; i < n; ++i) {
        const double start = start_value(id, i);
        const double host_change = h[static_cast<std::size_t>(i)] - start;
        const double device_change = d[static_cast<std::size_t>(i)] - start;
        diff += (device_change - host_change) * (device_change - host_change);
        change += host_change * host_change;
      }
      const double k = static_cast<double>(std::max(params[id].shape[0], params[id].shape[1]));
      const double allowed = kSteps * 0.1 * std::sqrt(k) * std::ldexp(1.0, -12) + step16;
      ASSERT_GT(change, 0.0) << params[id].name;
      EXPECT_LE(std::sqrt(diff / change), allowed) << params[id].name << " (Muon)";
      continue;
    }
    ++adamw_params;
    double worst_excess = 0.0;  // how far beyond its tolerance the worst element is
    for (std::int64_t i = 0; i < n; ++i) {
      const double hv = h[static_cast<std::size_t>(i)], dv = d[static_cast<std::size_t>(i)];
      const double tolerance =
          float_coefficients_agree
              ? 0.0
              : kSteps * adamw.lr * 1e-6 + step16 * std::fabs(hv) + smallest_step(dtype);
      worst_excess = std::max(worst_excess, std::fabs(dv - hv) - tolerance);
    }
    EXPECT_LE(worst_excess, 0.0) << params[id].name << " (AdamW)";
  }
  EXPECT_GT(muon_params, 0);
  EXPECT_GT(adamw_params, 0);

  // The optimizer state comes back to the host for checkpoints; with the same clipping
  // coefficient the momentum and AdamW moments are bit-identical (they never see the NS result).
  const optim::OptimizerState hs = p.host_optimizer->state_dict();
  const optim::OptimizerState ds = p.device.optimizer->state_dict();
  ASSERT_EQ(hs.size(), ds.size());
  for (const auto& [name, fields] : hs) {
    ASSERT_EQ(ds.count(name), 1u) << name;
    for (const auto& [field, values] : fields) {
      ASSERT_EQ(ds.at(name).at(field).size(), values.size()) << name << " " << field;
      if (float_coefficients_agree) {
        EXPECT_EQ(ds.at(name).at(field), values) << name << " " << field;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(ParamDTypes, DeviceLayerWiseByDType,
                         ::testing::Values(DType::kFloat32, DType::kBFloat16, DType::kFloat16),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return std::string(dtype_name(info.param));
                         });

TEST(DeviceLayerWise, StagingBuffersAreReusedAfterTheFirstStep) {
  SW_SKIP_WITHOUT_GPU();
  const ProcessGroupPtr world = init_mpi_world();
  const ParamList params = small_model();
  Paths p = make_paths(params, world, my_device(world), {}, {});
  DistributedDataParallel& dev = *p.device.ddp;
  const auto& staged =
      dynamic_cast<const HostStagedProcessGroup&>(*p.device.staged_groups.data_parallel);
  std::size_t after_first = 0;
  for (int step = 0; step < 3; ++step) {
    dev.zero_grad_buffer();
    for (ParamId id = params.size(); id-- > 0;) dev.register_grad_ready(id);
    dev.finish_grad_sync();
    p.device.optimizer->step();
    if (step == 0) after_first = staged.pool().allocated();
  }
  // One rank: every collective is in place and moves nothing, so nothing is staged.
  if (world->size() > 1) {
    EXPECT_GT(after_first, 0u);
  }
  EXPECT_EQ(staged.pool().allocated(), after_first);
}

TEST(DeviceLayerWise, AMissingDeviceIsNamed) {
  SW_SKIP_WITHOUT_GPU();
  const ProcessGroupPtr world = init_mpi_world();
  const int missing = cuda::device_count();
  try {
    make_paths(small_model(), world, missing, {}, {});
    ADD_FAILURE() << "device " << missing << " was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(str_cat("CUDA device ", missing, " does not exist")),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace shardwise
