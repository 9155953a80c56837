// MXFP8 refit with the quantization on the GPU (cuda::DeviceMxfp8Quantizer plugged into
// Mxfp8ReshardTransform) against the same transform on the CPU codec, under mpirun with every rank
// on one GPU: the same plans and the same bf16 weights go through execute_reshard twice, and the
// persistent MXFP8 buffers must hold the same bytes (E4M3 data and E8M0 scales), in both transform
// modes (convert-on-send: the senders quantize; receiver-side: the receivers quantize, completing
// blocks cut between pieces), both scale rules and both scale layouts. Exact, because the kernels
// are bit-exact with the CPU codec (tests/cuda/mxfp8_cuda_test.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "cuda/cuda_test_support.hpp"
#include "shardwise/comm/device_mapping.hpp"
#include "shardwise/comm/mpi_process_group.hpp"
#include "shardwise/core/float_convert.hpp"
#include "shardwise/cuda/mxfp8_reshard_cuda.hpp"
#include "shardwise/reshard/box.hpp"
#include "shardwise/reshard/mxfp8_reshard_transform.hpp"
#include "shardwise/reshard/refit_verification.hpp"
#include "shardwise/reshard/reshard_executor.hpp"

namespace shardwise {
namespace {

using RefitBytes = std::vector<std::uint8_t>;

// bf16 weights whose magnitude changes per 32-element block, so the blocks' scales differ.
RefitBytes refit_weights(const std::vector<std::int64_t>& shape, std::uint32_t seed) {
  std::int64_t n = 1;
  for (std::int64_t e : shape) n *= e;
  RefitBytes out(static_cast<std::size_t>(n) * 2);
  for (std::int64_t i = 0; i < n; ++i) {
    const int exponent =
        static_cast<int>((seed + static_cast<std::uint32_t>(i / 32) * 7u) % 13) - 6;
    const float v =
        std::ldexp(std::sin(0.013f * static_cast<float>(i) + static_cast<float>(seed)), exponent);
    const bf16_bits b = float_to_bf16(v);
    std::memcpy(out.data() + 2 * i, &b, 2);
  }
  return out;
}

RefitBytes refit_box(const RefitBytes& global, const std::vector<std::int64_t>& shape,
                     const Box& box) {
  RefitBytes out(static_cast<std::size_t>(box.numel()) * 2);
  copy_box(global.data(), shape, box, out.data(), box.extents(), Box::whole(box.extents()), 2);
  return out;
}

std::int64_t refit_cols(const Box& b) { return b.ranges.back().stop - b.ranges.back().start; }
std::int64_t refit_rows(const Box& b) { return b.numel() / refit_cols(b); }

class Mxfp8RefitCuda : public ::testing::Test {
 protected:
  ProcessGroupPtr world = init_mpi_world();
  int p = world->size();
  int me = world->rank();

  int my_device() const {
    const int local_rank = local_rank_from_environment().value_or(me);
    return device_for_local_rank(local_rank, cuda::device_count(), DeviceSharing::kShareDevices);
  }

  // Block-aligned requests (both modes), plus pieces that cut blocks (receiver-side only).
  std::vector<ParamReshardRequest> requests(bool block_aligned) const {
    std::vector<ParamReshardRequest> out;
    const std::vector<std::int64_t> rows_split{144, 96}, cols_split{24, 384};
    out.push_back({"a", DType::kBFloat16, parallel_sharding("a", rows_split, {.tp = p}),
                   parallel_sharding("a", rows_split, {.tp = 1, .dp = p})});
    out.push_back({"b", DType::kBFloat16, parallel_sharding("b", cols_split, {.tp = 1}),
                   parallel_sharding("b", cols_split, {.tp = p, .partition_dim = 1})});
    if (!block_aligned && p >= 2) {
      const std::vector<std::int64_t> small{8, 80};
      std::map<int, std::vector<Box>> src, dst;
      src[0] = {Box({{0, 8}, {0, 20}}), Box({{0, 3}, {70, 80}})};
      src[p - 1] = {Box({{0, 8}, {20, 70}}), Box({{3, 8}, {70, 80}})};
      dst[0] = {Box({{0, 4}, {0, 80}})};
      dst[p - 1] = {Box({{4, 8}, {0, 48}}), Box({{4, 8}, {48, 80}})};
      out.push_back({"x", DType::kBFloat16, explicit_sharding("x", small, src),
                     explicit_sharding("x", small, dst)});
    }
    return out;
  }

  // The persistent buffers after two refits (different weights) through a transform on
  // `quantizer`.
  std::map<std::string, std::vector<Mxfp8Tensor>> refit(
      const std::vector<ParamReshardRequest>& reqs, bool convert_on_send,
      const Mxfp8Options& options, const Mxfp8QuantizerPtr& quantizer) {
    const ReshardPlan plan = plan_reshard(reqs, me);
    std::map<std::string, std::vector<Mxfp8Tensor>> persistent;
    Mxfp8PersistentBuffers views;
    std::set<std::string> convertible;
    for (const ParamReshardRequest& req : plan.params()) {
      convertible.insert(req.name);
      for (const Box& b : req.destination.boxes_of(me)) {
        persistent[req.name].push_back(
            Mxfp8Tensor::allocate(refit_rows(b), refit_cols(b), options.layout));
      }
      for (Mxfp8Tensor& t : persistent[req.name]) views[req.name].push_back(t.view());
    }
    Mxfp8ReshardTransform transform(convertible, views, "", convert_on_send, options, quantizer);
    for (std::uint32_t seed : {3u, 8u}) {
      std::map<std::string, std::vector<RefitBytes>> store;
      ReshardSources sources;
      for (std::size_t i = 0; i < plan.params().size(); ++i) {
        const ParamReshardRequest& req = plan.params()[i];
        const RefitBytes global =
            refit_weights(req.source.global_shape, seed + static_cast<std::uint32_t>(i));
        for (const Box& b : req.source.boxes_of(me))
          store[req.name].push_back(refit_box(global, req.source.global_shape, b));
        for (RefitBytes& bytes : store[req.name]) {
          sources[req.name].push_back(SourceShard::plain(
              {bytes.data(), static_cast<std::int64_t>(bytes.size() / 2), DType::kBFloat16}));
        }
      }
      execute_reshard(*world, plan, sources, {}, &transform);
    }
    return persistent;
  }

  void expect_same_bytes(bool convert_on_send, const Mxfp8Options& options) {
    const auto device = std::make_shared<cuda::DeviceMxfp8Quantizer>(my_device());
    const std::vector<ParamReshardRequest> reqs = requests(convert_on_send);
    const auto on_cpu = refit(reqs, convert_on_send, options, host_mxfp8_quantizer());
    const auto on_gpu = refit(reqs, convert_on_send, options, device);
    ASSERT_EQ(on_cpu.size(), on_gpu.size());
    for (const auto& [name, tensors] : on_cpu) {
      ASSERT_EQ(on_gpu.at(name).size(), tensors.size()) << name;
      for (std::size_t b = 0; b < tensors.size(); ++b) {
        const Mxfp8Tensor& got = on_gpu.at(name)[b];
        EXPECT_EQ(cuda::test::first_bit_difference(got.data, tensors[b].data), "")
            << name << " box " << b << " data, rank " << me;
        EXPECT_EQ(cuda::test::first_bit_difference(got.scale, tensors[b].scale), "")
            << name << " box " << b << " scales, rank " << me;
      }
    }
  }
};

TEST_F(Mxfp8RefitCuda, ConvertOnSendMatchesTheCpuTransform) {
  SW_SKIP_WITHOUT_GPU();
  for (Mxfp8ScaleRule rule : {Mxfp8ScaleRule::kCeil, Mxfp8ScaleRule::kFloor}) {
    for (Mxfp8ScaleLayout layout :
         {Mxfp8ScaleLayout::kRowMajor, Mxfp8ScaleLayout::kSwizzled128x4}) {
      Mxfp8Options options;
      options.rule = rule;
      options.layout = layout;
      expect_same_bytes(true, options);
    }
  }
}

TEST_F(Mxfp8RefitCuda, ReceiverSideMatchesTheCpuTransform) {
  SW_SKIP_WITHOUT_GPU();
  for (Mxfp8ScaleRule rule : {Mxfp8ScaleRule::kCeil, Mxfp8ScaleRule::kFloor}) {
    for (Mxfp8ScaleLayout layout :
         {Mxfp8ScaleLayout::kRowMajor, Mxfp8ScaleLayout::kSwizzled128x4}) {
      Mxfp8Options options;
      options.rule = rule;
      options.layout = layout;
      expect_same_bytes(false, options);
    }
  }
}

// The refit engine with its quantization on the GPU delivers, in both MXFP8 modes, what the
// independent reference path (whole params sent point-to-point, sliced, quantize_mxfp8) computes.
TEST_F(Mxfp8RefitCuda, RefitEngineOnTheGpuMatchesTheReference) {
  SW_SKIP_WITHOUT_GPU();
  if (p < 2) GTEST_SKIP() << "a refit needs a training rank and an inference rank";
  const std::vector<RefitParam> params{{"layers.0.mlp.fc1.weight", {128, 64}},
                                       {"layers.0.attention.proj.weight", {64, 64}},
                                       {"layers.0.mlp.fc1.bias", {128}}};
  const RefitTopology topology{p >= 4 ? p - 2 : p - 1, p >= 4 ? 2 : 1};
  std::map<std::string, std::vector<float>> values;
  std::map<std::string, TensorView> views;
  for (std::size_t k = 0; k < params.size(); ++k) {
    const RefitBytes bf16 = refit_weights(params[k].shape, 5 + static_cast<std::uint32_t>(k));
    std::vector<float>& v = values[params[k].name];
    v.resize(bf16.size() / 2);
    for (std::size_t i = 0; i < v.size(); ++i) {
      bf16_bits b;
      std::memcpy(&b, bf16.data() + 2 * i, 2);
      v[i] = bf16_to_float(b);
    }
    views[params[k].name] = {v.data(), static_cast<std::int64_t>(v.size()), DType::kFloat32};
  }
  const auto device = std::make_shared<cuda::DeviceMxfp8Quantizer>(my_device());
  for (RefitMode mode : {RefitMode::kMxfp8ReceiverSide, RefitMode::kMxfp8ConvertOnSend}) {
    RefitEngine engine(world, params, topology, mode, {}, device);
    engine.refit(engine.is_train_rank() ? views : std::map<std::string, TensorView>{});
    const auto reference = send_reference_weights(*world, params, topology, 0, views);
    if (engine.is_inference_rank()) {
      const RefitVerification v =
          verify_refit(engine.weights(), reference, topology.tp, engine.tp_rank());
      EXPECT_TRUE(v.ok()) << refit_mode_name(mode) << " rank " << me << ": " << v.first_mismatch;
      EXPECT_GT(v.tensors_checked, 0);
    }
  }
}

TEST_F(Mxfp8RefitCuda, AMissingDeviceIsNamed) {
  SW_SKIP_WITHOUT_GPU();
  const int missing = cuda::device_count();
  try {
    cuda::DeviceMxfp8Quantizer quantizer(missing);
    ADD_FAILURE() << "device " << missing << " was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(str_cat("CUDA device ", missing, " does not exist")),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace shardwise
