// Executor over MPI (np 2, 4, 6): TP2->TP1, TP1->TP2, TP2->TP4, TP4->TP2, DP replicas -> TP,
// strided QKV, pipeline stages, expert parallel, co-located and disjoint rank sets, explicit specs
// that cut MXFP8 blocks. Every rank builds the global tensors from a seed, so received values are
// checked bit for bit locally; MXFP8 results must equal quantize_mxfp8 of the destination box of
// the global bf16 tensor, in both transform modes, and the persistent buffers must keep their
// addresses across repeated refits.
#include "shardwise/reshard/reshard_executor.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <set>

#include "reshard_test_data.hpp"
#include "shardwise/comm/mpi_process_group.hpp"
#include "shardwise/core/float_convert.hpp"
#include "shardwise/reshard/mxfp8_reshard_transform.hpp"

namespace shardwise {
namespace {

using Bytes = std::vector<std::uint8_t>;

using reshard_test::mix;
using reshard_test::numel_of;
using reshard_test::Shape;

// The global tensor every rank can build: magnitudes vary per 32-element block so MXFP8 scales
// differ between blocks.
Bytes global_tensor(DType dtype, const Shape& shape, std::uint64_t seed) {
  const std::int64_t n = numel_of(shape);
  Bytes out(static_cast<std::size_t>(n) * dtype_size(dtype));
  for (std::int64_t i = 0; i < n; ++i) {
    const std::uint64_t r = mix(seed * 7919 + static_cast<std::uint64_t>(i));
    const int exponent = static_cast<int>(mix(seed + static_cast<std::uint64_t>(i / 32)) % 13) - 6;
    const float v = std::ldexp(static_cast<float>(r % 20001) / 10000.0f - 1.0f, exponent);
    if (dtype == DType::kBFloat16) {
      const bf16_bits b = float_to_bf16(v);
      std::memcpy(out.data() + 2 * i, &b, 2);
    } else {
      std::memcpy(out.data() + 4 * i, &v, 4);
    }
  }
  return out;
}

Bytes extract(const Bytes& global, const Shape& shape, const Box& box, DType dtype) {
  Bytes out(static_cast<std::size_t>(box.numel()) * dtype_size(dtype));
  copy_box(global.data(), shape, box, out.data(), box.extents(), Box::whole(box.extents()),
           dtype_size(dtype));
  return out;
}

std::int64_t matrix_cols(const Box& b) { return b.ranges.back().stop - b.ranges.back().start; }
std::int64_t matrix_rows(const Box& b) { return b.numel() / matrix_cols(b); }

struct Case {
  std::string label;
  std::vector<ParamReshardRequest> params;
  bool block_aligned = true;  // convert-on-send is possible
};

class ReshardExecutor : public ::testing::Test {
 protected:
  ProcessGroupPtr world = init_mpi_world();
  int p = world->size();
  int me = world->rank();

  ParamReshardRequest param(const std::string& name, const Shape& shape, ParallelSharding src,
                            ParallelSharding dst, DType dtype = DType::kBFloat16) {
    return {name, dtype, parallel_sharding(name, shape, src), parallel_sharding(name, shape, dst)};
  }

  std::vector<Case> cases() {
    const int half = p / 2;
    const int big = p >= 4 ? 4 : 2;   // "TP4" where the world allows it
    const Shape rows_split{144, 96};  // dim 0 divisible by 2, 4, 6 and by 3 x those
    const Shape cols_split{24, 384};  // dim 1: 384 / 6 = 64, block aligned for every tp here
    std::vector<Case> out;
    out.push_back({"tp2_to_tp1",
                   {param("a", rows_split, {.tp = 2}, {.tp = 1, .dp = p}),
                    param("b", cols_split, {.tp = 2, .partition_dim = 1}, {.tp = 1})}});
    out.push_back(
        {"tp1_to_tp2",
         {param("a", rows_split, {.tp = 1}, {.tp = 2, .dp = half}),
          param("b", cols_split, {.tp = 1, .first_rank = p - 1}, {.tp = 2, .partition_dim = 1})}});
    out.push_back(
        {"tp2_to_tp4",
         {param("a", rows_split, {.tp = 2, .dp = half}, {.tp = big, .dp = p / big}),
          param("b", cols_split, {.tp = 2, .partition_dim = 1}, {.tp = big, .partition_dim = 1})}});
    out.push_back({"tp4_to_tp2",
                   {param("a", rows_split, {.tp = big}, {.tp = 2, .dp = half}),
                    param("b", cols_split, {.tp = big, .partition_dim = 1, .dp = p / big},
                          {.tp = 2, .partition_dim = 1})}});
    out.push_back({"dp_to_tp",
                   {param("a", rows_split, {.dp = p}, {.tp = p}),
                    param("b", cols_split, {.dp = p}, {.tp = p, .partition_dim = 1})}});
    out.push_back(
        {"strided_qkv_and_fp32",
         {param("qkv", rows_split, {.tp = 2, .stride = 3, .dp = half}, {.tp = p, .stride = 3}),
          param("w32", {12, 12, 10}, {.tp = 2, .partition_dim = 1}, {.tp = p, .partition_dim = 0},
                DType::kFloat32)}});
    out.push_back({"pipeline_and_experts",
                   {param("layer0", rows_split, {.tp = half, .pp = 2, .pp_stage = 0}, {.tp = p}),
                    param("layer1", rows_split, {.tp = half, .pp = 2, .pp_stage = 1}, {.tp = p}),
                    param("experts", {12, 16, 64}, {.tp = 1, .ep = 2, .expert_dim = 0, .dp = half},
                          {.tp = 2, .partition_dim = 2, .ep = half, .expert_dim = 0})}});
    // Disjoint rank sets: sources on the first ranks, destinations on the others.
    const int n_src = p >= 6 ? 4 : half;
    const int n_dst = p - n_src;
    out.push_back({"disjoint",
                   {param("a", rows_split, {.tp = n_src}, {.tp = n_dst, .first_rank = n_src}),
                    param("b", cols_split, {.tp = n_src, .partition_dim = 1},
                          {.tp = 1, .dp = n_dst, .first_rank = n_src})}});
    // Explicit specs whose last-dim cuts split MXFP8 blocks (receiver-side mode completes them).
    const Shape small{8, 80};
    std::map<int, std::vector<Box>> src_boxes, dst_boxes;
    src_boxes[0] = {Box({{0, 8}, {0, 20}}), Box({{0, 3}, {70, 80}})};
    src_boxes[p - 1] = {Box({{0, 8}, {20, 70}}), Box({{3, 8}, {70, 80}})};
    dst_boxes[0] = {Box({{0, 4}, {0, 80}})};
    dst_boxes[p - 1] = {Box({{4, 8}, {0, 48}}), Box({{4, 8}, {48, 80}})};
    out.push_back({"explicit_unaligned",
                   {{"x", DType::kBFloat16, explicit_sharding("x", small, src_boxes),
                     explicit_sharding("x", small, dst_boxes)}},
                   false});
    return out;
  }

  ReshardSources make_sources(const ReshardPlan& plan,
                              std::map<std::string, std::vector<Bytes>>& store,
                              std::uint64_t seed) {
    ReshardSources sources;
    for (std::size_t i = 0; i < plan.params().size(); ++i) {
      const ParamReshardRequest& req = plan.params()[i];
      const Bytes global = global_tensor(req.dtype, req.source.global_shape, seed + i);
      for (const Box& b : req.source.boxes_of(me)) {
        store[req.name].push_back(extract(global, req.source.global_shape, b, req.dtype));
      }
      for (Bytes& bytes : store[req.name]) {
        sources[req.name].push_back(SourceShard::plain(
            {bytes.data(), static_cast<std::int64_t>(bytes.size() / dtype_size(req.dtype)),
             req.dtype}));
      }
    }
    return sources;
  }

  void run_plain(const Case& c, std::uint64_t seed, ReshardWorkspace* workspace = nullptr) {
    const ReshardPlan plan = plan_reshard(c.params, me);
    std::map<std::string, std::vector<Bytes>> src_store, dst_store;
    const ReshardSources sources = make_sources(plan, src_store, seed);
    ReshardDestinations dests;
    for (const ParamReshardRequest& req : plan.params()) {
      for (const Box& b : req.destination.boxes_of(me)) {
        dst_store[req.name].emplace_back(
            static_cast<std::size_t>(b.numel()) * dtype_size(req.dtype), 0xAB);
      }
      for (Bytes& bytes : dst_store[req.name]) {
        dests[req.name].push_back({bytes.data(),
                                   static_cast<std::int64_t>(bytes.size() / dtype_size(req.dtype)),
                                   req.dtype});
      }
    }
    // Small batches in one of the runs: cuts must agree on every rank.
    ReshardOptions options;
    options.max_batch_bytes = seed % 2 ? 4096 : 0;
    options.workspace = workspace;
    const ReshardStats stats = execute_reshard(*world, plan, sources, dests, nullptr, options);
    EXPECT_GE(stats.batches, 1);
    for (std::size_t i = 0; i < plan.params().size(); ++i) {
      const ParamReshardRequest& req = plan.params()[i];
      const Bytes global = global_tensor(req.dtype, req.source.global_shape, seed + i);
      const auto& boxes = req.destination.boxes_of(me);
      for (std::size_t b = 0; b < boxes.size(); ++b) {
        EXPECT_TRUE(dst_store[req.name][b] ==
                    extract(global, req.source.global_shape, boxes[b], req.dtype))
            << c.label << " param " << req.name << " box " << to_string(boxes[b]) << " rank " << me;
      }
    }
  }

  // Runs `refits` refits through Mxfp8ReshardTransform and checks values and buffer addresses.
  void run_mxfp8(const Case& c, bool convert_on_send, Mxfp8ScaleLayout layout, int refits) {
    const ReshardPlan plan = plan_reshard(c.params, me);
    std::map<std::string, std::vector<Mxfp8Tensor>> persistent;
    Mxfp8PersistentBuffers views;
    std::set<std::string> convertible;
    for (const ParamReshardRequest& req : plan.params()) {
      if (req.dtype != DType::kBFloat16) continue;
      convertible.insert("decoder." + req.name);
      for (const Box& b : req.destination.boxes_of(me)) {
        persistent[req.name].push_back(
            Mxfp8Tensor::allocate(matrix_rows(b), matrix_cols(b), layout));
      }
      for (Mxfp8Tensor& t : persistent[req.name]) views[req.name].push_back(t.view());
    }
    // Rename the params with the prefix the transform strips.
    Case prefixed = c;
    for (auto& req : prefixed.params) req.name = "decoder." + req.name;
    const ReshardPlan named = plan_reshard(prefixed.params, me);
    Mxfp8ReshardTransform transform(convertible, views, "decoder.", convert_on_send);
    // Receiver-side mode: ranks that receive nothing need no transform.
    bool receives = false;
    for (const TransferOp& op : named.ops) receives |= !op.is_send;
    ReshardTransform* t = (convert_on_send || receives) ? &transform : nullptr;

    std::map<std::string, std::vector<const void*>> addresses;
    for (auto& [name, tensors] : persistent) {
      for (auto& tensor : tensors) {
        addresses[name].push_back(tensor.data.data());
        addresses[name].push_back(tensor.scale.data());
      }
    }
    for (int refit = 0; refit < refits; ++refit) {
      const std::uint64_t seed = 1000 + 17 * static_cast<std::uint64_t>(refit);
      std::map<std::string, std::vector<Bytes>> src_store;
      const ReshardSources sources = make_sources(named, src_store, seed);
      ReshardDestinations dests;  // fp32 params (not converted) go to plain buffers
      std::map<std::string, std::vector<Bytes>> dst_store;
      for (const ParamReshardRequest& req : named.params()) {
        if (req.dtype == DType::kBFloat16) continue;
        for (const Box& b : req.destination.boxes_of(me)) {
          dst_store[req.name].emplace_back(static_cast<std::size_t>(b.numel()) * 4, 0);
          dests[req.name].push_back({dst_store[req.name].back().data(), b.numel(), req.dtype});
        }
      }
      const ReshardStats stats = execute_reshard(*world, named, sources, dests, t);
      (void)stats;
      for (std::size_t i = 0; i < named.params().size(); ++i) {
        const ParamReshardRequest& req = named.params()[i];
        if (req.dtype != DType::kBFloat16) continue;
        const std::string key = req.name.substr(8);
        const Bytes global = global_tensor(req.dtype, req.source.global_shape, seed + i);
        const auto& boxes = req.destination.boxes_of(me);
        for (std::size_t b = 0; b < boxes.size(); ++b) {
          Bytes values = extract(global, req.source.global_shape, boxes[b], req.dtype);
          Mxfp8Options opts;
          opts.layout = layout;
          const Mxfp8Tensor expected =
              quantize_mxfp8({values.data(), boxes[b].numel(), DType::kBFloat16},
                             matrix_rows(boxes[b]), matrix_cols(boxes[b]), opts);
          const Mxfp8Tensor& got = persistent[key][b];
          EXPECT_TRUE(got.data == expected.data && got.scale == expected.scale)
              << c.label << (convert_on_send ? " convert-on-send" : " receiver-side") << " refit "
              << refit << " param " << req.name << " box " << to_string(boxes[b]) << " rank " << me;
        }
      }
    }
    std::map<std::string, std::vector<const void*>> after;
    for (auto& [name, tensors] : persistent) {
      for (auto& tensor : tensors) {
        after[name].push_back(tensor.data.data());
        after[name].push_back(tensor.scale.data());
      }
    }
    EXPECT_EQ(addresses, after);
    for (auto& [name, v] : views) {
      for (std::size_t b = 0; b < v.size(); ++b) {
        EXPECT_EQ(v[b].data.data(), persistent[name][b].data.data());
      }
    }
  }
};

TEST_F(ReshardExecutor, PlainValuesAreBitExact) {
  for (const Case& c : cases()) {
    run_plain(c, 11);
    run_plain(c, 12);  // batched
  }
}

// One workspace across plans of every shape (its blocks reused, regrown where a later piece is
// bigger): still bit-exact, and a second pass over the same plans needs no more memory.
TEST_F(ReshardExecutor, AWorkspaceKeptAcrossReshardsStaysBitExact) {
  ReshardWorkspace workspace;
  for (const Case& c : cases()) {
    run_plain(c, 21, &workspace);
    run_plain(c, 22, &workspace);
  }
  const std::size_t held = workspace.bytes_held();
  for (const Case& c : cases()) {
    run_plain(c, 23, &workspace);
    run_plain(c, 24, &workspace);
  }
  EXPECT_EQ(workspace.bytes_held(), held);
}

TEST_F(ReshardExecutor, Mxfp8ReceiverSideMatchesQuantizedGlobalSlice) {
  for (const Case& c : cases()) run_mxfp8(c, false, Mxfp8ScaleLayout::kRowMajor, 3);
  run_mxfp8(cases()[2], false, Mxfp8ScaleLayout::kSwizzled128x4, 1);
}

TEST_F(ReshardExecutor, Mxfp8ConvertOnSendMatchesQuantizedGlobalSlice) {
  for (const Case& c : cases()) {
    if (c.block_aligned) run_mxfp8(c, true, Mxfp8ScaleLayout::kRowMajor, 3);
  }
  run_mxfp8(cases()[3], true, Mxfp8ScaleLayout::kSwizzled128x4, 1);
}

TEST_F(ReshardExecutor, ConvertOnSendHalvesWireBytes) {
  const Case c = cases()[7];  // disjoint: everything crosses the wire
  const ReshardPlan plan = plan_reshard(c.params, me);
  std::map<std::string, std::vector<Bytes>> store;
  const ReshardSources sources = make_sources(plan, store, 5);
  std::int64_t wire[2] = {0, 0};
  for (bool on_send : {false, true}) {
    std::map<std::string, std::vector<Mxfp8Tensor>> persistent;
    Mxfp8PersistentBuffers views;
    std::set<std::string> names;
    for (const ParamReshardRequest& req : plan.params()) {
      names.insert(req.name);
      for (const Box& b : req.destination.boxes_of(me)) {
        persistent[req.name].push_back(Mxfp8Tensor::allocate(matrix_rows(b), matrix_cols(b)));
      }
      for (auto& t : persistent[req.name]) views[req.name].push_back(t.view());
    }
    Mxfp8ReshardTransform transform(names, views, "", on_send);
    const ReshardStats s = execute_reshard(*world, plan, sources, {}, &transform);
    std::int64_t total = s.bytes_sent;
    world->all_reduce({&total, 1, DType::kInt64}, ReduceOp::kSum)->wait();
    wire[on_send] = total;
  }
  std::int64_t elements = 0;
  for (const ReshardTask& t : plan.global->tasks) elements += t.global.numel();
  EXPECT_EQ(wire[0], 2 * elements);              // bf16
  EXPECT_EQ(wire[1], elements + elements / 32);  // e4m3 + one scale per 32 (aligned pieces)
}

TEST_F(ReshardExecutor, ConvertOnSendRejectsUnalignedPiecesOnEveryRank) {
  const Case c = cases().back();
  const ReshardPlan plan = plan_reshard(c.params, me);
  std::map<std::string, std::vector<Bytes>> store;
  const ReshardSources sources = make_sources(plan, store, 3);
  std::vector<Mxfp8Tensor> persistent;
  Mxfp8PersistentBuffers views;
  for (const Box& b : plan.params()[0].destination.boxes_of(me)) {
    persistent.push_back(Mxfp8Tensor::allocate(matrix_rows(b), matrix_cols(b)));
  }
  for (auto& t : persistent) views["x"].push_back(t.view());
  Mxfp8ReshardTransform transform({"x"}, views, "", true);
  // Ranks with an unaligned piece name it; the others learn which ranks failed. Nobody hangs.
  try {
    execute_reshard(*world, plan, sources, {}, &transform);
    ADD_FAILURE() << "no error on rank " << me;
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("param x"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("block aligned"), std::string::npos) << e.what();
  } catch (const CommError& e) {
    EXPECT_NE(std::string(e.what()).find("failed to prepare"), std::string::npos) << e.what();
  }
  world->barrier()->wait();
}

TEST_F(ReshardExecutor, QuantizedSourceIsDequantizedForBf16Destinations) {
  const Shape shape{48, 96};
  const std::vector<ParamReshardRequest> reqs{
      param("q", shape, {.tp = 1}, {.tp = p, .partition_dim = 0})};
  const ReshardPlan plan = plan_reshard(reqs, me);
  Bytes global = global_tensor(DType::kBFloat16, shape, 77);
  const Mxfp8Tensor q = quantize_mxfp8({global.data(), numel_of(shape), DType::kBFloat16}, 48, 96);
  ReshardSources sources;
  if (me == 0) sources["q"].push_back(SourceShard::quantized(q.view()));
  Bytes dst(static_cast<std::size_t>(48 / p * 96 * 2));
  ReshardDestinations dests{{"q", {{dst.data(), 48 / p * 96, DType::kBFloat16}}}};
  execute_reshard(*world, plan, sources, dests);
  Bytes dequantized(global.size());
  dequantize_mxfp8_into(q.view(), {dequantized.data(), numel_of(shape), DType::kBFloat16});
  const Box mine = plan.params()[0].destination.boxes_of(me)[0];
  EXPECT_TRUE(dst == extract(dequantized, shape, mine, DType::kBFloat16));
}

TEST_F(ReshardExecutor, DisagreeingPlansAreRejected) {
  // Rank 0 plans a different layout: every rank gets a CommError instead of a hang.
  const Shape shape{16, 8};
  const std::vector<ParamReshardRequest> reqs{
      param("w", shape, {.tp = 1}, {.tp = me == 0 ? 1 : 2, .dp = me == 0 ? p : p / 2})};
  const ReshardPlan plan = plan_reshard(reqs, me);
  EXPECT_THROW(execute_reshard(*world, plan, {}, {}), CommError);
}

}  // namespace
}  // namespace shardwise
