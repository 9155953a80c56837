// Refit over MPI (np 2, 4, 6): the first ranks train (every param whole, DP replicas), the last
// one (np 2) or two ranks form the inference TP group. In every mode each refit must deliver, bit
// for bit, what an independent path computes (the whole fp32 params sent point-to-point, sliced
// by tp_export's index arithmetic, rounded to bf16, quantized with quantize_mxfp8), into
// persistent buffers whose addresses never change, with the expected bytes on the wire.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>

#include "reshard_test_data.hpp"
#include "shardwise/comm/mpi_process_group.hpp"
#include "shardwise/core/float_convert.hpp"
#include "shardwise/reshard/refit_verification.hpp"

namespace shardwise {
namespace {

using reshard_test::mix;
using reshard_test::numel_of;
using reshard_test::Shape;

// A small GPT's params (hidden 64, ffn 128, vocab 64, 2 layers).
std::vector<RefitParam> gpt_params() {
  std::vector<RefitParam> p{{"embedding.word_embeddings.weight", {64, 64}},
                            {"embedding.position_embeddings.weight", {16, 64}},
                            {"final_layernorm.weight", {64}},
                            {"final_layernorm.bias", {64}}};
  for (int l = 0; l < 2; ++l) {
    const std::string x = "layers." + std::to_string(l) + ".";
    p.push_back({x + "input_layernorm.weight", {64}});
    p.push_back({x + "attention.qkv.weight", {192, 64}});
    p.push_back({x + "attention.qkv.bias", {192}});
    p.push_back({x + "attention.proj.weight", {64, 64}});
    p.push_back({x + "attention.proj.bias", {64}});
    p.push_back({x + "post_attention_layernorm.weight", {64}});
    p.push_back({x + "mlp.fc1.weight", {128, 64}});
    p.push_back({x + "mlp.fc1.bias", {128}});
    p.push_back({x + "mlp.fc2.weight", {64, 128}});
    p.push_back({x + "mlp.fc2.bias", {64}});
  }
  return p;
}

// "Trained" values every training rank can build: a new set per refit (seed), magnitudes varying
// per 32-element block so MXFP8 scales differ.
std::map<std::string, std::vector<float>> trained_values(const std::vector<RefitParam>& params,
                                                         std::uint64_t seed) {
  std::map<std::string, std::vector<float>> out;
  std::uint64_t salt = seed;
  for (const RefitParam& p : params) {
    auto& v = out[p.name];
    v.resize(static_cast<std::size_t>(numel_of(p.shape)));
    ++salt;
    for (std::size_t i = 0; i < v.size(); ++i) {
      const std::uint64_t r = mix(salt * 104729 + i);
      const int exponent = static_cast<int>(mix(salt + i / 32) % 11) - 5;
      v[i] = std::ldexp(static_cast<float>(r % 200001) / 100000.0f - 1.0f, exponent);
    }
  }
  return out;
}

std::map<std::string, TensorView> views_of(std::map<std::string, std::vector<float>>& values) {
  std::map<std::string, TensorView> out;
  for (auto& [name, v] : values) {
    out[name] = {v.data(), static_cast<std::int64_t>(v.size()), DType::kFloat32};
  }
  return out;
}

class Refit : public ::testing::Test {
 protected:
  ProcessGroupPtr world = init_mpi_world();
  int p = world->size();
  int me = world->rank();
  RefitTopology topology{p >= 4 ? p - 2 : p - 1, p >= 4 ? 2 : 1};
  std::vector<RefitParam> params = gpt_params();

  // Runs `refits` refits in `mode`, checking values, addresses and wire bytes; returns the stats
  // of the last one.
  RefitStats run(RefitMode mode, int refits) {
    RefitEngine engine(world, params, topology, mode);
    EXPECT_EQ(engine.is_train_rank(), me < topology.num_train_ranks);
    EXPECT_EQ(engine.is_inference_rank(), me >= topology.num_train_ranks);
    const std::vector<const void*> addresses = engine.buffer_addresses();
    EXPECT_EQ(addresses.empty(), !engine.is_inference_rank());
    RefitStats stats;
    for (int k = 0; k < refits; ++k) {
      auto values = trained_values(params, 100 + 31 * static_cast<std::uint64_t>(k));
      const auto views = views_of(values);
      engine.fill_buffers(0xFF);  // stale contents cannot pass the check
      stats = engine.refit(engine.is_train_rank() ? views : std::map<std::string, TensorView>{});
      const auto reference = send_reference_weights(*world, params, topology, 0, views);
      if (engine.is_inference_rank()) {
        const RefitVerification v =
            verify_refit(engine.weights(), reference, topology.tp, engine.tp_rank());
        EXPECT_TRUE(v.ok()) << refit_mode_name(mode) << " refit " << k << " rank " << me << ": "
                            << v.first_mismatch;
        EXPECT_EQ(v.tensors_checked, static_cast<int>(params.size()));
      }
      EXPECT_EQ(engine.buffer_addresses(), addresses) << refit_mode_name(mode) << " refit " << k;
    }
    return stats;
  }

  // Bytes on the wire per refit, from first principles: every inference rank receives its local
  // tensors; bf16 = 2 bytes per element, MXFP8 on the wire = 1 byte + 1 scale per 32 (every
  // local row here is a whole number of blocks).
  std::int64_t expected_wire_bytes(bool mxfp8_on_wire) const {
    std::int64_t bytes = 0;
    for (const RefitParam& prm : params) {
      const Shape local =
          tp_local_shape(prm.shape, megatron_tp_rule(prm.name, prm.shape), topology.tp);
      const std::int64_t n = numel_of(local);
      bytes +=
          topology.tp *
          (mxfp8_on_wire && is_mxfp8_refit_candidate(prm.name, prm.shape) ? n + n / 32 : 2 * n);
    }
    return bytes;
  }
};

TEST_F(Refit, Bf16IsBitExactAndReusesItsBuffers) {
  const RefitStats stats = run(RefitMode::kBf16, 3);
  EXPECT_EQ(stats.wire_bytes, expected_wire_bytes(false));
  std::int64_t elements = 0;
  for (const RefitParam& prm : params) {
    elements += topology.tp * numel_of(tp_local_shape(
                                  prm.shape, megatron_tp_rule(prm.name, prm.shape), topology.tp));
  }
  EXPECT_EQ(stats.elements, elements);
  // The group total is the sum of what each rank's executor counted.
  std::int64_t sent = stats.local.bytes_sent;
  world->all_reduce({&sent, 1, DType::kInt64}, ReduceOp::kSum)->wait();
  EXPECT_EQ(sent, stats.wire_bytes);
}

// The reported times are the slowest rank's: every rank reports the same values, positive for
// the transfer, and none longer than the longest wall time a rank measured around refit().
TEST_F(Refit, TimesAreTheSlowestRanksAndFitTheCallersWallTime) {
  RefitEngine engine(world, params, topology, RefitMode::kBf16);
  auto values = trained_values(params, 7);
  const auto views = views_of(values);
  world->barrier()->wait();
  const auto t0 = std::chrono::steady_clock::now();
  const RefitStats stats =
      engine.refit(engine.is_train_rank() ? views : std::map<std::string, TensorView>{});
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  // Max and min over the ranks (min as the max of the negation) must agree.
  std::int64_t nanos[4] = {static_cast<std::int64_t>(stats.seconds * 1e9),
                           static_cast<std::int64_t>(stats.stage_seconds * 1e9),
                           -static_cast<std::int64_t>(stats.seconds * 1e9),
                           -static_cast<std::int64_t>(stats.stage_seconds * 1e9)};
  world->all_reduce({nanos, 4, DType::kInt64}, ReduceOp::kMax)->wait();
  EXPECT_EQ(nanos[0], -nanos[2]) << "ranks report different transfer times";
  EXPECT_EQ(nanos[1], -nanos[3]) << "ranks report different staging times";
  double longest_wall = wall;
  std::int64_t wall_nanos = static_cast<std::int64_t>(wall * 1e9);
  world->all_reduce({&wall_nanos, 1, DType::kInt64}, ReduceOp::kMax)->wait();
  longest_wall = std::max(longest_wall, static_cast<double>(wall_nanos) / 1e9);
  EXPECT_GT(stats.seconds, 0.0);
  EXPECT_LE(stats.seconds, longest_wall);
  EXPECT_LE(stats.stage_seconds, longest_wall);
  EXPECT_GE(stats.stage_seconds, 0.0);
  EXPECT_DOUBLE_EQ(stats.gigabytes_per_second(),
                   static_cast<double>(stats.wire_bytes) / stats.seconds / 1e9);
}

TEST_F(Refit, Mxfp8ReceiverSideIsBitExactAndReusesItsBuffers) {
  const RefitStats stats = run(RefitMode::kMxfp8ReceiverSide, 3);
  EXPECT_EQ(stats.wire_bytes, expected_wire_bytes(false));  // bf16 on the wire
}

TEST_F(Refit, Mxfp8ConvertOnSendIsBitExactWithFewerBytes) {
  const RefitStats stats = run(RefitMode::kMxfp8ConvertOnSend, 3);
  EXPECT_EQ(stats.wire_bytes, expected_wire_bytes(true));
  EXPECT_LT(stats.wire_bytes, expected_wire_bytes(false));
}

TEST_F(Refit, InferenceRanksHoldMxfp8ExactlyForTheTwoDimensionalNonEmbeddingWeights) {
  RefitEngine engine(world, params, topology, RefitMode::kMxfp8ReceiverSide);
  if (!engine.is_inference_rank()) return;
  ASSERT_EQ(engine.weights().size(), params.size());
  for (const InferenceTensor& t : engine.weights()) {
    EXPECT_EQ(t.mxfp8, t.global_shape.size() == 2 && t.name.find("embedding") == std::string::npos)
        << t.name;
    if (t.name.ends_with("qkv.weight")) {
      EXPECT_EQ(t.local_shape, (Shape{192 / topology.tp, 64}));
    }
    if (t.name.ends_with("fc2.weight")) {
      EXPECT_EQ(t.local_shape, (Shape{64, 128 / topology.tp}));
    }
    if (t.name.ends_with("fc2.bias")) {
      EXPECT_EQ(t.local_shape, (Shape{64}));
    }
  }
}

TEST_F(Refit, TheSendsAreSpreadOverTheTrainingReplicas) {
  RefitEngine engine(world, params, topology, RefitMode::kBf16);
  auto values = trained_values(params, 5);
  const RefitStats stats =
      engine.refit(engine.is_train_rank() ? views_of(values) : std::map<std::string, TensorView>{});
  std::vector<std::int64_t> sent(static_cast<std::size_t>(p));
  world
      ->all_gather({sent.data(), p, DType::kInt64},
                   {const_cast<std::int64_t*>(&stats.local.bytes_sent), 1, DType::kInt64})
      ->wait();
  std::int64_t max_sent = 0;
  for (int r = 0; r < p; ++r) {
    if (r >= topology.num_train_ranks) {
      EXPECT_EQ(sent[static_cast<std::size_t>(r)], 0) << r;
    } else {
      EXPECT_GT(sent[static_cast<std::size_t>(r)], 0) << r;
    }
    max_sent = std::max(max_sent, sent[static_cast<std::size_t>(r)]);
  }
  // No replica carries more than twice its fair share.
  EXPECT_LE(max_sent * topology.num_train_ranks, 2 * stats.wire_bytes);
}

TEST_F(Refit, VerificationNamesTheFirstCorruptedTensor) {
  RefitEngine engine(world, params, topology, RefitMode::kMxfp8ConvertOnSend);
  auto values = trained_values(params, 9);
  const auto views = views_of(values);
  engine.refit(engine.is_train_rank() ? views : std::map<std::string, TensorView>{});
  const auto reference = send_reference_weights(*world, params, topology, 0, views);
  if (!engine.is_inference_rank()) return;
  auto weights = engine.weights();  // a copy to corrupt
  for (InferenceTensor& t : weights) {
    if (t.name == "layers.1.mlp.fc2.weight") t.quantized.scale[3] ^= 1;
    if (t.name == "layers.1.mlp.fc1.bias") t.bf16[5] ^= 0x10;
  }
  const RefitVerification v = verify_refit(weights, reference, topology.tp, engine.tp_rank());
  EXPECT_FALSE(v.ok());
  // Name order: fc1.bias comes before fc2.weight.
  EXPECT_NE(v.first_mismatch.find("layers.1.mlp.fc1.bias"), std::string::npos) << v.first_mismatch;
  EXPECT_NE(v.first_mismatch.find("[5]"), std::string::npos) << v.first_mismatch;
  EXPECT_TRUE(verify_refit(engine.weights(), reference, topology.tp, engine.tp_rank()).ok());
}

TEST_F(Refit, MissingTrainingValueIsAnErrorNamingTheParam) {
  if (p < 2) GTEST_SKIP();
  RefitEngine engine(world, params, topology, RefitMode::kBf16);
  auto values = trained_values(params, 3);
  auto views = views_of(values);
  views.erase("layers.0.mlp.fc1.weight");
  if (engine.is_train_rank()) {
    // Raised before any communication: only the training ranks call, nobody hangs.
    try {
      engine.refit(views);
      ADD_FAILURE() << "no error";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("layers.0.mlp.fc1.weight"), std::string::npos);
    }
  }
  world->barrier()->wait();
}

}  // namespace
}  // namespace shardwise
