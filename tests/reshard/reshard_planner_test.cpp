// Planner properties over hundreds of random spec pairs, checked against a brute-force
// element-ownership reference: every destination element of every rank is received exactly once
// from a rank that holds it, every send has exactly one matching recv (same task id, mirrored
// slices), and plans do not depend on request order or on the planner instance.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>

#include "sanitizer_budget.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/reshard/reshard_plan.hpp"

namespace shardwise {

void PrintTo(const Box& box, std::ostream* out) { *out << to_string(box); }

namespace {

using Shape = std::vector<std::int64_t>;

Box box2(std::int64_t a0, std::int64_t a1, std::int64_t b0, std::int64_t b1) {
  return Box({{a0, a1}, {b0, b1}});
}
Box box1(std::int64_t a0, std::int64_t a1) { return Box({{a0, a1}}); }

// Every element index of `box` (global coordinates), row-major over the global shape.
template <typename Fn>
void for_each_element(const Box& box, const Shape& shape, Fn&& fn) {
  if (box.empty()) return;
  std::vector<std::int64_t> idx(box.ndim());
  for (std::size_t d = 0; d < box.ndim(); ++d) idx[d] = box.ranges[d].start;
  while (true) {
    std::int64_t flat = 0;
    for (std::size_t d = 0; d < box.ndim(); ++d) flat = flat * shape[d] + idx[d];
    fn(flat);
    std::size_t d = box.ndim();
    while (d > 0) {
      --d;
      if (++idx[d] < box.ranges[d].stop) break;
      idx[d] = box.ranges[d].start;
      if (d == 0) return;
    }
  }
}

std::int64_t numel_of(const Shape& s) {
  std::int64_t n = 1;
  for (auto x : s) n *= x;
  return n;
}

// Random partition of `box` into pieces by recursive random cuts.
void random_partition(const Box& box, std::mt19937& rng, int depth, std::vector<Box>& out) {
  std::vector<std::size_t> cuttable;
  for (std::size_t d = 0; d < box.ndim(); ++d) {
    if (box.ranges[d].stop - box.ranges[d].start > 1) cuttable.push_back(d);
  }
  if (depth == 0 || cuttable.empty() || rng() % 4 == 0) {
    out.push_back(box);
    return;
  }
  const std::size_t d = cuttable[rng() % cuttable.size()];
  const std::int64_t len = box.ranges[d].stop - box.ranges[d].start;
  const std::int64_t cut = box.ranges[d].start + 1 + static_cast<std::int64_t>(rng() % (len - 1));
  Box a = box, b = box;
  a.ranges[d].stop = cut;
  b.ranges[d].start = cut;
  random_partition(a, rng, depth - 1, out);
  random_partition(b, rng, depth - 1, out);
}

ShardingSpec random_spec(const std::string& name, const Shape& shape, std::mt19937& rng) {
  const int kind = static_cast<int>(rng() % 4);
  if (kind == 0) {
    // Explicit: a random partition, each piece held by 1-2 random ranks (no rank twice
    // overlapping: pieces are disjoint).
    std::vector<Box> pieces;
    random_partition(Box::whole(shape), rng, 4, pieces);
    std::map<int, std::vector<Box>> boxes;
    for (const Box& p : pieces) {
      const int copies = 1 + static_cast<int>(rng() % 2);
      std::set<int> holders;
      for (int c = 0; c < copies; ++c) holders.insert(static_cast<int>(rng() % 8));
      for (int h : holders) boxes[h].push_back(p);
    }
    return explicit_sharding(name, shape, boxes);
  }
  ParallelSharding p;
  const int ndim = static_cast<int>(shape.size());
  // Tensor parallel with a stride, on a dim it divides.
  for (int attempt = 0; attempt < 8; ++attempt) {
    const int tp = 1 + static_cast<int>(rng() % 8);
    const int stride = 1 + static_cast<int>(rng() % 3);
    const int dim = static_cast<int>(rng() % static_cast<unsigned>(ndim));
    if (shape[dim] % (tp * stride) == 0) {
      p.tp = tp;
      p.stride = stride;
      p.partition_dim = dim;
      break;
    }
  }
  if (kind == 2 && ndim >= 2) {
    // Expert parallel over dim 0 (experts), TP on another dim.
    for (int ep : {4, 3, 2}) {
      if (shape[0] % ep == 0 && (p.tp == 1 || p.partition_dim != 0)) {
        p.ep = ep;
        p.expert_dim = 0;
        break;
      }
    }
  }
  p.dp = 1 + static_cast<int>(rng() % 3);
  if (kind == 3) {
    p.pp = 1 + static_cast<int>(rng() % 3);
    p.pp_stage = static_cast<int>(rng() % static_cast<unsigned>(p.pp));
  }
  p.first_rank = static_cast<int>(rng() % 4);
  return parallel_sharding(name, shape, p);
}

Shape random_shape(std::mt19937& rng) {
  static const std::int64_t kDims[] = {1, 2, 5, 6, 8, 12, 16, 24, 48};
  const int ndim = 1 + static_cast<int>(rng() % 3);
  Shape s;
  for (int d = 0; d < ndim; ++d) s.push_back(kDims[rng() % std::size(kDims)]);
  // Keep 3-d tensors small enough for the brute-force reference.
  while (numel_of(s) > 20000) s[rng() % s.size()] = 6;
  return s;
}

std::set<int> all_ranks(const std::vector<ParamReshardRequest>& reqs) {
  std::set<int> ranks;
  for (const auto& r : reqs) {
    for (int x : r.source.ranks()) ranks.insert(x);
    for (int x : r.destination.ranks()) ranks.insert(x);
  }
  return ranks;
}

// The brute-force reference check of one request list.
void check_plan(const std::vector<ParamReshardRequest>& reqs, const std::string& label) {
  ReshardPlanner planner;
  const std::set<int> ranks = all_ranks(reqs);
  std::map<int, ReshardPlan> plans;
  for (int r : ranks) plans[r] = planner.plan(reqs, r);
  const GlobalReshardPlan& global = *plans.begin()->second.global;

  for (const ParamReshardRequest& req : reqs) {
    const Shape& shape = req.source.global_shape;
    const std::int64_t n = numel_of(shape);
    // Ownership: per source rank, which elements it holds.
    std::map<int, std::vector<char>> holds;
    for (const auto& [rank, boxes] : req.source.boxes_by_rank) {
      std::vector<char>& mine = holds[rank];
      mine.assign(static_cast<std::size_t>(n), 0);
      for (const Box& b : boxes) for_each_element(b, shape, [&](std::int64_t e) { mine[e] = 1; });
    }
    for (const auto& [rank, boxes] : req.destination.boxes_by_rank) {
      std::vector<int> received(static_cast<std::size_t>(n), 0);
      for (const TransferOp& op : plans[rank].ops) {
        if (op.is_send || op.param != req.name) continue;
        const Box& dst_box = boxes[static_cast<std::size_t>(op.my_box)];
        ASSERT_EQ(op.my_slice, relative_to(op.global_slice, dst_box)) << label;
        const Box& src_box = req.source.boxes_of(op.peer_rank)[op.peer_box];
        ASSERT_EQ(op.peer_slice, relative_to(op.global_slice, src_box)) << label;
        for_each_element(op.global_slice, shape, [&](std::int64_t e) {
          ++received[e];
          ASSERT_TRUE(holds.count(op.peer_rank) && holds[op.peer_rank][e])
              << label << ": " << req.name << " element " << e << " sent by rank " << op.peer_rank
              << " which does not hold it";
        });
      }
      std::vector<int> wanted(static_cast<std::size_t>(n), 0);
      for (const Box& b : boxes) for_each_element(b, shape, [&](std::int64_t e) { wanted[e] = 1; });
      ASSERT_EQ(received, wanted) << label << ": param " << req.name << " dst rank " << rank;
    }
  }

  // Task-id agreement: each task = exactly one send and one mirrored recv.
  std::map<std::int64_t, std::vector<std::pair<int, const TransferOp*>>> by_task;
  for (const auto& [rank, plan] : plans) {
    std::int64_t prev = -1;
    for (const TransferOp& op : plan.ops) {
      ASSERT_GE(op.task_id, prev) << label;
      prev = op.task_id;
      by_task[op.task_id].emplace_back(rank, &op);
    }
  }
  ASSERT_EQ(static_cast<std::int64_t>(by_task.size()), plans.begin()->second.num_tasks()) << label;
  for (const auto& [task, sides] : by_task) {
    ASSERT_EQ(sides.size(), 2u) << label << " task " << task;
    const auto* send = sides[0].second->is_send ? &sides[0] : &sides[1];
    const auto* recv = sides[0].second->is_send ? &sides[1] : &sides[0];
    ASSERT_TRUE(send->second->is_send && !recv->second->is_send) << label << " task " << task;
    EXPECT_EQ(send->second->peer_rank, recv->first);
    EXPECT_EQ(recv->second->peer_rank, send->first);
    EXPECT_EQ(send->second->my_slice, recv->second->peer_slice);
    EXPECT_EQ(send->second->peer_slice, recv->second->my_slice);
    EXPECT_EQ(send->second->my_box, recv->second->peer_box);
    EXPECT_EQ(send->second->global_slice, recv->second->global_slice);
    EXPECT_EQ(send->second->param, recv->second->param);
    EXPECT_EQ(global.tasks[static_cast<std::size_t>(task)].src_rank, send->first);
  }

  // Determinism: a fresh planner, requests in another order, gives identical ops.
  std::vector<ParamReshardRequest> shuffled = reqs;
  std::reverse(shuffled.begin(), shuffled.end());
  ReshardPlanner other;
  for (int r : ranks) {
    const ReshardPlan again = other.plan(shuffled, r);
    ASSERT_EQ(again.ops, plans[r].ops) << label << " rank " << r;
    ASSERT_EQ(again.global->tasks, global.tasks) << label;
    ASSERT_EQ(again.global->fingerprint, global.fingerprint) << label;
  }
}

TEST(ReshardPlanner, RandomSpecPairsCoverExactlyOnce) {
  std::mt19937 rng(12345);
  for (int trial = 0; trial < test::sweep_cases(300); ++trial) {
    std::vector<ParamReshardRequest> reqs;
    const int nparams = 1 + static_cast<int>(rng() % 3);
    for (int p = 0; p < nparams; ++p) {
      const std::string name = "layer" + std::to_string(rng() % 100) + ".w" + std::to_string(p);
      const Shape shape = random_shape(rng);
      reqs.push_back(
          {name, DType::kBFloat16, random_spec(name, shape, rng), random_spec(name, shape, rng)});
    }
    check_plan(reqs, "trial " + std::to_string(trial));
    if (testing::Test::HasFatalFailure()) return;
  }
}

TEST(ReshardPlanner, TensorParallelUsesLcmTiles) {
  // TP2 -> TP3 over dim 0 of 12 rows: LCM 6, tiles of 2 rows; pieces are runs of whole tiles.
  // Ranks are shared, so destination rank 1 first copies rows 6-8 from itself.
  ParallelSharding tp2{.tp = 2}, tp3{.tp = 3};
  const Shape shape{12, 4};
  const std::vector<ParamReshardRequest> reqs{{"w", DType::kBFloat16,
                                               parallel_sharding("w", shape, tp2),
                                               parallel_sharding("w", shape, tp3)}};
  const GlobalReshardPlan plan = compute_global_reshard_plan(reqs);
  ASSERT_EQ(plan.tasks.size(), 4u);
  const std::vector<std::tuple<int, int, Box>> expected{{0, 0, box2(0, 4, 0, 4)},
                                                        {1, 1, box2(6, 8, 0, 4)},
                                                        {0, 1, box2(4, 6, 0, 4)},
                                                        {1, 2, box2(8, 12, 0, 4)}};
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(plan.tasks[i].src_rank, std::get<0>(expected[i])) << i;
    EXPECT_EQ(plan.tasks[i].dst_rank, std::get<1>(expected[i])) << i;
    EXPECT_EQ(plan.tasks[i].global, std::get<2>(expected[i])) << i;
    EXPECT_EQ(plan.tasks[i].task_id, static_cast<std::int64_t>(i));
  }
}

TEST(ReshardPlanner, StridedSpecHoldsOnePartOfEveryBlock) {
  // Fused QKV: 12 rows = 3 blocks of 4; TP2 rank 1 holds rows 2-4, 6-8, 10-12.
  const ShardingSpec s = parallel_sharding("qkv", {12, 3}, {.tp = 2, .stride = 3, .dp = 2});
  EXPECT_EQ(s.boxes_of(1),
            (std::vector<Box>{box2(2, 4, 0, 3), box2(6, 8, 0, 3), box2(10, 12, 0, 3)}));
  EXPECT_EQ(s.boxes_of(3), s.boxes_of(1));  // dp replica
  EXPECT_EQ(s.ranks(), (std::vector<int>{0, 1, 2, 3}));
}

TEST(ReshardPlanner, PipelineAndExpertPlacement) {
  const ShardingSpec pp = parallel_sharding("w", {8}, {.tp = 2, .dp = 2, .pp = 3, .pp_stage = 2});
  EXPECT_EQ(pp.ranks(), (std::vector<int>{8, 9, 10, 11}));
  // 8 experts over ep 4 with etp 2: rank t + 2 * e.
  const ShardingSpec ep =
      parallel_sharding("e", {8, 6}, {.tp = 2, .partition_dim = 1, .ep = 4, .expert_dim = 0});
  EXPECT_EQ(ep.boxes_of(5), (std::vector<Box>{box2(4, 6, 3, 6)}));
  EXPECT_EQ(pipeline_stage_of_layer(0, 10, 4), 0);
  EXPECT_EQ(pipeline_stage_of_layer(2, 10, 4), 0);
  EXPECT_EQ(pipeline_stage_of_layer(3, 10, 4), 1);
  EXPECT_EQ(pipeline_stage_of_layer(6, 10, 4), 2);
  EXPECT_EQ(pipeline_stage_of_layer(8, 10, 4), 3);
  EXPECT_EQ(pipeline_stage_of_layer(9, 10, 4), 3);
}

TEST(ReshardPlanner, PrefersLocalCopyThenSpreadsOverReplicas) {
  const Shape shape{64};
  // Source: 4 full replicas on ranks 0-3. Destination TP4 on ranks 2-5.
  const ShardingSpec src = parallel_sharding("w", shape, {.dp = 4});
  const ShardingSpec dst = parallel_sharding("w", shape, {.tp = 4, .first_rank = 2});
  const GlobalReshardPlan plan = compute_global_reshard_plan({{"w", DType::kFloat32, src, dst}});
  ASSERT_EQ(plan.tasks.size(), 4u);
  EXPECT_EQ(plan.tasks[0].src_rank, 2);  // rank 2 already holds its slice
  EXPECT_EQ(plan.tasks[1].src_rank, 3);
  std::set<int> remote_senders{plan.tasks[2].src_rank, plan.tasks[3].src_rank};
  EXPECT_EQ(remote_senders.size(), 2u) << "remote pieces should come from different replicas";
  EXPECT_FALSE(remote_senders.count(2) || remote_senders.count(3));
}

TEST(ReshardPlanner, CachesByInputs) {
  ReshardPlanner planner;
  const Shape shape{16, 8};
  std::vector<ParamReshardRequest> reqs{
      {"a", DType::kBFloat16, parallel_sharding("a", shape, {.tp = 2}),
       parallel_sharding("a", shape, {.tp = 4})},
      {"b", DType::kBFloat16, parallel_sharding("b", shape, {.tp = 1, .dp = 2}),
       parallel_sharding("b", shape, {.tp = 2, .partition_dim = 1})}};
  const ReshardPlan p1 = planner.plan(reqs, 0);
  std::swap(reqs[0], reqs[1]);
  const ReshardPlan p2 = planner.plan(reqs, 1);
  EXPECT_EQ(planner.cache_misses(), 1);
  EXPECT_EQ(planner.cache_hits(), 1);
  EXPECT_EQ(p1.global.get(), p2.global.get());
  reqs[0].dtype = DType::kFloat32;  // a different input
  planner.plan(reqs, 0);
  EXPECT_EQ(planner.cache_misses(), 2);
}

template <typename Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "no InvalidArgument";
}

TEST(ReshardPlanner, ImpossibleRequestsNameParamAndRanks) {
  const ShardingSpec a = parallel_sharding("w", {8, 4}, {.tp = 2});
  const ShardingSpec b = parallel_sharding("w", {8, 6}, {.tp = 2});
  std::string msg = error_of([&] { compute_global_reshard_plan({{"w", DType::kBFloat16, a, b}}); });
  EXPECT_NE(msg.find("param w"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[8, 4]"), std::string::npos) << msg;

  // Source holds rows 0-4 only: destination rank 1's rows 4-8 are nowhere.
  const ShardingSpec half = explicit_sharding("w", {8, 4}, {{0, {box2(0, 4, 0, 4)}}});
  msg = error_of([&] { compute_global_reshard_plan({{"w", DType::kBFloat16, half, a}}); });
  EXPECT_NE(msg.find("param w"), std::string::npos) << msg;
  EXPECT_NE(msg.find("destination rank 1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("4:8"), std::string::npos) << msg;

  msg = error_of([&] { pair_reshard_requests({{"x", a}, {"y", a}}, {{"y", a}, {"z", a}}); });
  EXPECT_NE(msg.find("only in source: {x}"), std::string::npos) << msg;
  EXPECT_NE(msg.find("only in destination: {z}"), std::string::npos) << msg;

  msg = error_of([&] {
    compute_global_reshard_plan({{"w", DType::kBFloat16, a, a}, {"w", DType::kBFloat16, a, a}});
  });
  EXPECT_NE(msg.find("param w is requested more than once"), std::string::npos) << msg;

  msg = error_of([&] { parallel_sharding("qkv", {10, 4}, {.tp = 2, .stride = 3}); });
  EXPECT_NE(msg.find("param qkv"), std::string::npos) << msg;

  msg = error_of([&] { explicit_sharding("w", {8}, {{3, {box1(0, 5), box1(4, 8)}}}); });
  EXPECT_NE(msg.find("rank 3 holds overlapping boxes"), std::string::npos) << msg;
}

TEST(ReshardBox, CopyBoxMatchesElementLoop) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const Shape src_shape = random_shape(rng);
    Shape dst_shape = src_shape;
    std::vector<Box> parts;
    random_partition(Box::whole(src_shape), rng, 3, parts);
    const Box slice = parts[rng() % parts.size()];
    // Place the slice at a random position of a destination at least as large.
    Box dst_slice = slice;
    for (std::size_t d = 0; d < dst_shape.size(); ++d) {
      dst_shape[d] += static_cast<std::int64_t>(rng() % 3);
      const std::int64_t len = slice.ranges[d].stop - slice.ranges[d].start;
      const std::int64_t start = static_cast<std::int64_t>(rng() % (dst_shape[d] - len + 1));
      dst_slice.ranges[d] = {start, start + len};
    }
    std::vector<std::int32_t> src(static_cast<std::size_t>(numel_of(src_shape)));
    for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::int32_t>(i);
    std::vector<std::int32_t> dst(static_cast<std::size_t>(numel_of(dst_shape)), -1);
    copy_box(src.data(), src_shape, slice, dst.data(), dst_shape, dst_slice, 4);
    std::vector<std::int64_t> from, to;
    for_each_element(slice, src_shape, [&](std::int64_t e) { from.push_back(e); });
    for_each_element(dst_slice, dst_shape, [&](std::int64_t e) { to.push_back(e); });
    std::vector<std::int32_t> expected(dst.size(), -1);
    for (std::size_t i = 0; i < from.size(); ++i) expected[to[i]] = src[from[i]];
    ASSERT_EQ(dst, expected) << "trial " << trial << " " << to_string(slice) << " -> "
                             << to_string(dst_slice);
    // Contiguity agrees with the element offsets.
    bool consecutive = true;
    for (std::size_t i = 1; i < from.size(); ++i) consecutive &= from[i] == from[i - 1] + 1;
    EXPECT_EQ(is_contiguous_in(slice, src_shape), consecutive) << to_string(slice);
    EXPECT_EQ(flat_offset(slice, src_shape), from.front());
  }
}

// A slice given in global coordinates where box-local ones were meant overflowed the heap.
TEST(ReshardBox, CopyBoxRefusesSlicesOutsideTheirTensor) {
  std::vector<float> src(32), dst(16);
  const Box global = box2(0, 4, 4, 8);  // columns 4..8 of a [4, 8] tensor
  EXPECT_NO_THROW(copy_box(src.data(), {4, 8}, global, dst.data(), {4, 4}, box2(0, 4, 0, 4), 4));
  try {
    copy_box(src.data(), {4, 8}, global, dst.data(), {4, 4}, global, 4);
    ADD_FAILURE() << "no error";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("destination slice [0:4, 4:8]"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(flat_offset(global, {4}), ShapeError);  // fewer extents than dimensions
}

TEST(ReshardBox, SubtractLeavesDisjointComplement) {
  const Box a = box2(0, 6, 0, 5);
  const Box b = box2(2, 4, 1, 3);
  const std::vector<Box> rest = subtract(a, b);
  std::int64_t total = b.numel();
  for (const Box& r : rest) {
    total += r.numel();
    EXPECT_FALSE(intersect(r, b).has_value());
    for (const Box& o : rest) {
      if (&o != &r) {
        EXPECT_FALSE(intersect(r, o).has_value());
      }
    }
  }
  EXPECT_EQ(total, a.numel());
}

}  // namespace
}  // namespace shardwise
