// Reshard throughput next to raw MPI point-to-point of the same messages, in one run:
//   for each layout change, the executor (plan + pack/unpack + tags + agreement, its staging
//   buffers in a ReshardWorkspace kept across the iterations as RefitEngine keeps one) vs MPI_Isend
//   / MPI_Irecv of contiguous buffers of exactly the bytes each rank's ops move, to the same peers
//   (local tasks as one memcpy each), best of --iters;
//   MXFP8: wire bytes and time of receiver-side conversion vs convert-on-send;
//   `bench: reshard_<p>r`: the packed-columns change's moved bytes (all ranks) per second vs an
//   MPI ping-pong between ranks 0 and 1 of one rank's share of those bytes.
//
//   mpirun -np 4 bench_reshard_throughput [--rows 8192] [--cols 4096] [--params 2] [--iters 5]
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "bench_harness.hpp"
#include "machine_limits.hpp"
#include "shardwise/comm/mpi_process_group.hpp"
#include "shardwise/reshard/mxfp8_reshard_transform.hpp"
#include "shardwise/reshard/reshard_executor.hpp"

namespace {

using namespace shardwise;
using bench::Clock;
using bench::seconds_since;

struct Options {
  std::int64_t rows = 8192;
  std::int64_t cols = 4096;
  int params = 2;
  int iters = 5;
};

Options parse(int argc, char** argv) {
  Options o;
  bench::parse_bench_options(
      "bench_reshard_throughput", argc, argv,
      {{"--rows", &o.rows}, {"--cols", &o.cols}, {"--params", &o.params}, {"--iters", &o.iters}});
  SW_REQUIRE(o.rows > 0 && o.cols > 0 && o.params > 0 && o.iters > 0, InvalidArgument,
             "bench_reshard_throughput: options must be positive");
  return o;
}

// Local storage for one rank's side of a plan.
struct Buffers {
  std::vector<std::vector<std::uint16_t>> storage;
  ReshardSources sources;
  ReshardDestinations destinations;
};

Buffers make_buffers(const ReshardPlan& plan, int me) {
  Buffers b;
  std::size_t count = 0;
  for (const auto& req : plan.params()) {
    count += req.source.boxes_of(me).size() + req.destination.boxes_of(me).size();
  }
  b.storage.reserve(count);
  for (const auto& req : plan.params()) {
    for (const Box& box : req.source.boxes_of(me)) {
      auto& s = b.storage.emplace_back(static_cast<std::size_t>(box.numel()));
      for (std::size_t i = 0; i < s.size(); ++i) s[i] = static_cast<std::uint16_t>(0x3f00 + i % 97);
      b.sources[req.name].push_back(SourceShard::plain({s.data(), box.numel(), DType::kBFloat16}));
    }
    for (const Box& box : req.destination.boxes_of(me)) {
      auto& s = b.storage.emplace_back(static_cast<std::size_t>(box.numel()));
      b.destinations[req.name].push_back({s.data(), box.numel(), DType::kBFloat16});
    }
  }
  return b;
}

// The same messages as the plan, as raw MPI on contiguous buffers.
double raw_mpi_seconds(const ReshardPlan& plan, int me, int iters) {
  std::vector<std::vector<std::uint16_t>> send, recv;
  std::vector<int> send_peer, recv_peer;
  std::int64_t local = 0;
  for (const TransferOp& op : plan.ops) {
    if (op.peer_rank == me) {
      if (!op.is_send) local += op.global_slice.numel();
      continue;
    }
    auto& list = op.is_send ? send : recv;
    list.emplace_back(static_cast<std::size_t>(op.global_slice.numel()), 1);
    (op.is_send ? send_peer : recv_peer).push_back(op.peer_rank);
  }
  std::vector<std::uint16_t> local_src(static_cast<std::size_t>(local), 2),
      local_dst(local_src.size());
  double best = 1e30;
  for (int it = 0; it < iters; ++it) {
    MPI_Barrier(MPI_COMM_WORLD);
    const auto t0 = Clock::now();
    // One tag: MPI keeps each pair's messages in order, and both sides list them by task id.
    std::vector<MPI_Request> reqs;
    for (std::size_t i = 0; i < recv.size(); ++i) {
      reqs.emplace_back();
      MPI_Irecv(recv[i].data(), static_cast<int>(recv[i].size()), MPI_UINT16_T, recv_peer[i], 0,
                MPI_COMM_WORLD, &reqs.back());
    }
    for (std::size_t i = 0; i < send.size(); ++i) {
      reqs.emplace_back();
      MPI_Isend(send[i].data(), static_cast<int>(send[i].size()), MPI_UINT16_T, send_peer[i], 0,
                MPI_COMM_WORLD, &reqs.back());
    }
    if (!local_src.empty()) std::memcpy(local_dst.data(), local_src.data(), local_src.size() * 2);
    MPI_Waitall(static_cast<int>(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE);
    MPI_Barrier(MPI_COMM_WORLD);
    best = std::min(best, seconds_since(t0));
  }
  return best;
}

struct Timed {
  double seconds = 1e30;
  std::int64_t wire_bytes = 0;   // summed over ranks
  std::int64_t moved_bytes = 0;  // bf16 bytes of all tasks
};

Timed time_reshard(ProcessGroup& world, const ReshardPlan& plan, Buffers& buffers,
                   ReshardTransform* transform, int iters) {
  Timed t;
  ReshardWorkspace workspace;  // kept across the iterations, as RefitEngine keeps it across refits
  ReshardOptions options;
  options.workspace = &workspace;
  for (int it = 0; it < iters; ++it) {
    world.barrier()->wait();
    const auto t0 = Clock::now();
    const ReshardStats s =
        execute_reshard(world, plan, buffers.sources, buffers.destinations, transform, options);
    world.barrier()->wait();
    t.seconds = std::min(t.seconds, seconds_since(t0));
    t.wire_bytes = s.bytes_sent;
  }
  world.all_reduce({&t.wire_bytes, 1, DType::kInt64}, ReduceOp::kSum)->wait();
  for (const ReshardTask& task : plan.global->tasks) t.moved_bytes += task.global.numel() * 2;
  return t;
}

struct Scenario {
  std::string name;
  ParallelSharding src, dst;
};

// The layout changes timed, at p ranks (half = p / 2). The third is the figure's.
std::vector<Scenario> layout_scenarios(int p) {
  const int half = p / 2;
  const std::string h = std::to_string(half), all = std::to_string(p);
  return {
      {"disjoint TP" + h + " -> TP" + h + " (rows)",
       {.tp = half},
       {.tp = half, .first_rank = half}},
      {"co-located TP" + h + " -> TP" + all + " (rows)", {.tp = half, .dp = 2}, {.tp = p}},
      {"co-located TP" + h + " -> TP" + all + " (cols, packed)",
       {.tp = half, .partition_dim = 1, .dp = 2},
       {.tp = p, .partition_dim = 1}},
      {"DP" + all + " -> TP" + all + " (rows)", {.dp = p}, {.tp = p}},
  };
}

ReshardPlan plan_for(const Options& o, const Scenario& s, int me) {
  const std::vector<std::int64_t> shape{o.rows, o.cols};
  std::vector<ParamReshardRequest> reqs;
  for (int i = 0; i < o.params; ++i) {
    const std::string name = "layer" + std::to_string(i) + ".weight";
    reqs.push_back({name, DType::kBFloat16, parallel_sharding(name, shape, s.src),
                    parallel_sharding(name, shape, s.dst)});
  }
  return plan_reshard(reqs, me);
}

// One row per scenario: reshard time against raw MPI point-to-point of the same messages.
// Returns the packed-columns scenario's timing.
Timed print_scenario_table(ProcessGroup& world, const Options& o,
                           const std::vector<Scenario>& scenarios) {
  const int me = world.rank();
  if (me == 0) {
    std::printf("reshard_throughput: %d ranks, %d params of [%lld, %lld] bf16, best of %d\n",
                world.size(), o.params, static_cast<long long>(o.rows),
                static_cast<long long>(o.cols), o.iters);
    std::printf("%-44s %10s %10s %10s %10s %8s\n", "layout change", "moved MB", "reshard s",
                "raw MPI s", "GB/s", "ratio");
  }
  Timed packed;
  for (const Scenario& s : scenarios) {
    const ReshardPlan plan = plan_for(o, s, me);
    Buffers buffers = make_buffers(plan, me);
    const Timed r = time_reshard(world, plan, buffers, nullptr, o.iters);
    if (&s == &scenarios[2]) packed = r;
    const double raw = raw_mpi_seconds(plan, me, o.iters);
    if (me == 0) {
      std::printf("%-44s %10.1f %10.4f %10.4f %10.2f %8.2f\n", s.name.c_str(),
                  static_cast<double>(r.moved_bytes) / 1e6, r.seconds, raw,
                  static_cast<double>(r.moved_bytes) / r.seconds / 1e9, raw / r.seconds);
    }
  }
  return packed;
}

// The figure: bytes moved by the packed-columns reshard (all ranks) per second vs one-way MPI
// ping-pong bandwidth of one rank's share of them (machine_limits.hpp). The reshard is timed
// twice more, with a ping-pong probe before, between and after (the best probe divides the
// median time).
void print_packed_figure(ProcessGroup& world, const Options& o, const Scenario& scenario,
                         const Timed& packed) {
  const int p = world.size(), me = world.rank();
  const auto share =
      static_cast<std::size_t>(std::max<std::int64_t>(packed.moved_bytes / p, 1 << 20));
  bench::ProbeSamples limit;
  std::vector<double> packed_seconds{packed.seconds};
  const ReshardPlan plan = plan_for(o, scenario, me);
  Buffers buffers = make_buffers(plan, me);
  for (int round = 0; round < 2; ++round) {
    limit.add(bench::mpi_ping_pong_gbps(share, o.iters, 2 * share));
    packed_seconds.push_back(time_reshard(world, plan, buffers, nullptr, o.iters).seconds);
  }
  limit.add(bench::mpi_ping_pong_gbps(share, o.iters, 2 * share));
  std::sort(packed_seconds.begin(), packed_seconds.end());
  if (me == 0) {
    bench::print_figure(str_cat("reshard_", p, "r").c_str(),
                        static_cast<double>(packed.moved_bytes) / packed_seconds[1] / 1e9, limit,
                        "GB/s");
  }
}

// MXFP8 on the disjoint layout, where every byte crosses the wire: receiver-side conversion
// (bf16 on the wire) against convert-on-send (e4m3 codes + e8m0 scales).
void print_mxfp8_wire(ProcessGroup& world, const Options& o, const Scenario& disjoint) {
  const int me = world.rank();
  const ReshardPlan plan = plan_for(o, disjoint, me);
  Buffers buffers = make_buffers(plan, me);
  std::vector<Mxfp8Tensor> persistent;
  Mxfp8PersistentBuffers views;
  std::set<std::string> names;
  for (const auto& req : plan.params()) {
    names.insert(req.name);
    for (const Box& box : req.destination.boxes_of(me)) {
      persistent.push_back(Mxfp8Tensor::allocate(box.ranges[0].stop - box.ranges[0].start,
                                                 box.ranges[1].stop - box.ranges[1].start));
    }
  }
  std::size_t k = 0;
  for (const auto& req : plan.params()) {
    for (std::size_t b = 0; b < req.destination.boxes_of(me).size(); ++b) {
      views[req.name].push_back(persistent[k++].view());
    }
  }
  Timed modes[2];
  for (bool on_send : {false, true}) {
    Mxfp8ReshardTransform transform(names, views, "", on_send);
    modes[on_send] = time_reshard(world, plan, buffers, &transform, o.iters);
  }
  if (me != 0) return;
  std::printf("\nMXFP8 (%s): wire bytes and time\n", disjoint.name.c_str());
  std::printf("  receiver-side (bf16 wire): %12lld bytes  %8.4f s\n",
              static_cast<long long>(modes[0].wire_bytes), modes[0].seconds);
  std::printf("  convert-on-send (e4m3+e8m0): %10lld bytes  %8.4f s  (%.3f of receiver-side)\n",
              static_cast<long long>(modes[1].wire_bytes), modes[1].seconds,
              static_cast<double>(modes[1].wire_bytes) / static_cast<double>(modes[0].wire_bytes));
}

int bench_main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  ProcessGroupPtr world = init_mpi_world();
  const int p = world->size();
  SW_REQUIRE(p >= 2 && p % 2 == 0, InvalidArgument,
             "bench_reshard_throughput: run with an even number of ranks >= 2 (got ", p, ")");
  const std::vector<Scenario> scenarios = layout_scenarios(p);
  const Timed packed = print_scenario_table(*world, o, scenarios);
  print_packed_figure(*world, o, scenarios[2], packed);
  print_mxfp8_wire(*world, o, scenarios[0]);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return run_rank_main([&] { return bench_main(argc, argv); });
}
