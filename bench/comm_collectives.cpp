// The MPI process group side by side with raw MPI calls, in one run:
//   overhead  all_reduce / reduce_scatter / all_gather through ProcessGroup (issue + wait) vs the
//             same MPI call made directly on MPI_COMM_WORLD;
//   bf16      a bf16 all_reduce (fp32 accumulation: widen, fp32 MPI_SUM, round once) vs a raw
//             fp32 MPI_Allreduce of the same element count;
//   overlap   compute + all_reduce issued before the compute and waited after, vs blocking
//             MPI_Allreduce followed by the compute.
//   distance  reduce_scatter / all_gather bus bandwidth ((p-1)/p of the full buffer per second)
//             against the limit measured in the same run: an MPI ping-pong between ranks 0 and 1
//             with messages of one shard (at least 8 MiB). Printed as
//             `bench: reduce_scatter_<p>r_<MiB>MiB ours=<GB/s> limit=<GB/s> unit=GB/s ratio=<r>`.
//   algorithm ring vs direct vs shared memory vs MPI's reduce_scatter / all_gather per shard
//             size, the measurement behind CollectiveAlgorithm::kAuto (kP2PMinShardBytes).
//
//   mpirun -np 2 bench_comm_collectives --numel 4194304                   (16 MiB figures)
//   mpirun -np 4 --oversubscribe bench_comm_collectives --numel 16777216  (64 MiB figures)
//   options: [--numel 4194304] [--iters 10] [--passes 8]
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "machine_limits.hpp"
#include "shardwise/comm/mpi_process_group.hpp"
#include "shardwise/comm/symmetric_memory.hpp"
#include "shardwise/core/float_convert.hpp"
#include "shardwise/core/logging.hpp"

namespace {

using namespace shardwise;
using Clock = std::chrono::steady_clock;

struct Options {
  std::int64_t numel = 4 << 20;
  int iters = 10;
  int passes = 8;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i];
    const std::string value = argv[i + 1];
    if (key == "--numel")
      o.numel = std::stoll(value);
    else if (key == "--iters")
      o.iters = std::stoi(value);
    else if (key == "--passes")
      o.passes = std::stoi(value);
    else
      throw InvalidArgument("bench_comm_collectives: unknown option " + key);
  }
  SW_REQUIRE(o.numel > 0 && o.iters > 0 && o.passes >= 0, InvalidArgument,
             "bench_comm_collectives: --numel, --iters must be positive");
  return o;
}

// Median seconds of `iters` runs of fn, after one warm-up; every rank starts each run together.
template <typename Fn>
double median_seconds(int iters, Fn&& fn) {
  fn();
  std::vector<double> t;
  for (int i = 0; i < iters; ++i) {
    MPI_Barrier(MPI_COMM_WORLD);
    const auto t0 = Clock::now();
    fn();
    double dt = std::chrono::duration<double>(Clock::now() - t0).count();
    MPI_Allreduce(MPI_IN_PLACE, &dt, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);  // slowest rank
    t.push_back(dt);
  }
  return bench::median(t);
}

ProcessGroupPtr group_with(const ProcessGroupPtr& world, CollectiveAlgorithm algorithm,
                           const char* name) {
  ProcessGroupPtr group = split_group(world, 0, world->rank(), name);
  ProcessGroupOptions options = process_group_options(group);
  options.collective_algorithm = algorithm;
  set_process_group_options(group, options);
  return group;
}

// Median-round bus bandwidths of one placement of the buffers, in GB/s.
struct CollectiveRates {
  std::vector<double> reduce_scatter, all_gather;

  void add(double bus_gb, double rs_seconds, double ag_seconds) {
    reduce_scatter.push_back(bus_gb / rs_seconds);
    all_gather.push_back(bus_gb / ag_seconds);
  }
  // Prints `reduce_scatter<suffix>` and `all_gather<suffix>` against the limit and the memory
  // bound (rank 0).
  void print(const std::string& suffix, const bench::ProbeSamples& limit,
             const bench::ProbeSamples& memory_bound) const {
    const double rs = bench::median(reduce_scatter);
    const double ag = bench::median(all_gather);
    bench::print_figure(str_cat("reduce_scatter", suffix).c_str(), rs, limit, "GB/s");
    bench::print_figure(str_cat("all_gather", suffix).c_str(), ag, limit, "GB/s");
    bench::print_figure(str_cat("reduce_scatter", suffix, "_of_memory_bound").c_str(), rs,
                        memory_bound, "GB/s");
    bench::print_figure(str_cat("all_gather", suffix, "_of_memory_bound").c_str(), ag, memory_bound,
                        "GB/s");
  }
};

// Bus bandwidth of reduce_scatter and all_gather over `n` fp32 elements vs the ping-pong limit:
// three rounds, each a ping-pong probe then the collectives (median of `iters` runs each); the
// figure is the median round's bandwidth over the best probe, printed with the probes' spread.
// Each round also probes the memory bound (bench::collective_memory_bound_gbs), which the
// `<figure>_of_memory_bound` lines divide by. Measured twice per round: on the caller's own
// vectors, and with the full buffer in symmetric memory (`<figure>_symmetric`: the reduce-scatter's
// input and the all-gather's output, as DDP's buffers are), where the collectives run in place.
void print_distance(const ProcessGroupPtr& world, std::int64_t n, int iters) {
  const int p = world->size();
  if (p < 2) return;
  std::vector<float> full(static_cast<std::size_t>(n), 1.0f);
  std::vector<float> shard(static_cast<std::size_t>(n / p), 1.0f);
  const TensorView f{full.data(), n, DType::kFloat32};
  const TensorView s{shard.data(), n / p, DType::kFloat32};
  const std::size_t bytes = static_cast<std::size_t>(n) * sizeof(float);
  const SymmetricMemoryPtr symmetric = allocate_symmetric_memory(world, bytes);
  const TensorView sym{symmetric->data(), n, DType::kFloat32};
  std::fill_n(sym.as<float>(), n, 1.0f);
  const double bus = static_cast<double>(bytes) * (p - 1) / p / 1e9;
  bench::ProbeSamples limit, memory_bound;
  bench::StreamProbe stream;
  CollectiveRates own, in_place;
  for (int round = 0; round < 3; ++round) {
    // The reduce-scatter's memory on each rank: the full input and its shard of output.
    limit.add(bench::mpi_ping_pong_gbps(std::max<std::size_t>(bytes / p, 8u << 20), iters,
                                        bytes + bytes / p));
    memory_bound.add(bench::collective_memory_bound_gbs(stream, p));
    auto seconds = [&](auto&& op) { return median_seconds(iters, [&] { op()->wait(); }); };
    own.add(bus, seconds([&] { return world->reduce_scatter(s, f, ReduceOp::kSum); }),
            seconds([&] { return world->all_gather(f, s); }));
    in_place.add(bus, seconds([&] { return world->reduce_scatter(s, sym, ReduceOp::kSum); }),
                 seconds([&] { return world->all_gather(sym, s); }));
  }
  const std::string suffix = str_cat("_", p, "r_", bytes >> 20, "MiB");
  if (world->rank() != 0) return;
  own.print(suffix, limit, memory_bound);
  if (symmetric->shared()) in_place.print(suffix + "_symmetric", limit, memory_bound);
}

// Ring vs direct vs shared memory vs MPI per shard size (milliseconds per operation).
void print_algorithm_sweep(const ProcessGroupPtr& world, int iters, std::size_t max_shard_bytes) {
  const int p = world->size();
  if (p < 2) return;
  ProcessGroupPtr ring = group_with(world, CollectiveAlgorithm::kRing, "ring");
  ProcessGroupPtr direct = group_with(world, CollectiveAlgorithm::kDirect, "direct");
  ProcessGroupPtr mpi = group_with(world, CollectiveAlgorithm::kMpi, "mpi");
  ProcessGroupPtr shm = group_with(world, CollectiveAlgorithm::kSharedMemory, "shm");
  shardwise::log::info(
      "shard_bytes  reduce_scatter ms: ring direct shm mpi   all_gather ms: ring direct shm mpi");
  for (std::size_t shard_bytes = 4096; shard_bytes <= max_shard_bytes; shard_bytes *= 4) {
    const std::int64_t m = static_cast<std::int64_t>(shard_bytes / sizeof(float));
    std::vector<float> full(static_cast<std::size_t>(m * p), 1.0f);
    std::vector<float> shard(static_cast<std::size_t>(m), 1.0f);
    const TensorView f{full.data(), m * p, DType::kFloat32};
    const TensorView s{shard.data(), m, DType::kFloat32};
    auto rs = [&](const ProcessGroupPtr& g) {
      return median_seconds(iters, [&] { g->reduce_scatter(s, f, ReduceOp::kSum)->wait(); });
    };
    auto ag = [&](const ProcessGroupPtr& g) {
      return median_seconds(iters, [&] { g->all_gather(f, s)->wait(); });
    };
    shardwise::log::info(shard_bytes, "  ", rs(ring) * 1e3, " ", rs(direct) * 1e3, " ",
                         rs(shm) * 1e3, " ", rs(mpi) * 1e3, "   ", ag(ring) * 1e3, " ",
                         ag(direct) * 1e3, " ", ag(shm) * 1e3, " ", ag(mpi) * 1e3);
  }
}

// Simulated compute: `passes` sweeps of arithmetic over x.
double compute(std::vector<float>& x, int passes) {
  double acc = 0;
  for (int p = 0; p < passes; ++p) {
    for (float& v : x) {
      v = v * 0.999f + 0.001f * std::sqrt(std::fabs(v) + 1.0f);
      acc += v;
    }
  }
  return acc;
}

}  // namespace

int main(int argc, char** argv) {
  return run_rank_main([&] {
    const Options o = parse(argc, argv);
    ProcessGroupPtr world = init_mpi_world();
    const int p = world->size();
    const std::int64_t n = o.numel / p * p;
    const int count = static_cast<int>(n);
    std::vector<float> buf(static_cast<std::size_t>(n), 1.0f);
    std::vector<float> shard(static_cast<std::size_t>(n / p), 0.0f);
    std::vector<float> gathered(static_cast<std::size_t>(n), 0.0f);
    const TensorView v{buf.data(), n, DType::kFloat32};
    const TensorView s{shard.data(), n / p, DType::kFloat32};
    const TensorView g{gathered.data(), n, DType::kFloat32};
    shardwise::log::info("bench_comm_collectives: ", p, " ranks, ", n, " fp32 elements (",
                         n * 4 / (1 << 20), " MiB), median of ", o.iters);
    shardwise::log::info("op               ours_ms   raw_mpi_ms  ours/raw");
    auto row = [&](const char* name, double ours, double raw) {
      shardwise::log::info(name, std::string(16 - std::string(name).size(), ' '), ours * 1e3, "  ",
                           raw * 1e3, "  ", ours / raw);
    };
    row("all_reduce",
        median_seconds(o.iters, [&] { world->all_reduce(v, ReduceOp::kSum)->wait(); }),
        median_seconds(o.iters, [&] {
          MPI_Allreduce(MPI_IN_PLACE, buf.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        }));
    row("reduce_scatter",
        median_seconds(o.iters, [&] { world->reduce_scatter(s, v, ReduceOp::kSum)->wait(); }),
        median_seconds(o.iters, [&] {
          MPI_Reduce_scatter_block(buf.data(), shard.data(), count / p, MPI_FLOAT, MPI_SUM,
                                   MPI_COMM_WORLD);
        }));
    row("all_gather", median_seconds(o.iters, [&] { world->all_gather(g, s)->wait(); }),
        median_seconds(o.iters, [&] {
          MPI_Allgather(shard.data(), count / p, MPI_FLOAT, gathered.data(), count / p, MPI_FLOAT,
                        MPI_COMM_WORLD);
        }));
    std::vector<bf16_bits> half(static_cast<std::size_t>(n), float_to_bf16(1.0f));
    row("bf16 all_reduce",
        median_seconds(
            o.iters,
            [&] {
              world->all_reduce({half.data(), n, DType::kBFloat16}, ReduceOp::kAvg)->wait();
            }),
        median_seconds(o.iters, [&] {
          MPI_Allreduce(MPI_IN_PLACE, buf.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        }));
    std::vector<float> work(static_cast<std::size_t>(n), 0.5f);
    double sink = 0;
    const double overlapped = median_seconds(o.iters, [&] {
      WorkPtr w = world->all_reduce(v, ReduceOp::kSum);
      sink += compute(work, o.passes);
      w->wait();
    });
    const double serial = median_seconds(o.iters, [&] {
      MPI_Allreduce(MPI_IN_PLACE, buf.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      sink += compute(work, o.passes);
    });
    const double compute_only = median_seconds(o.iters, [&] { sink += compute(work, o.passes); });
    row("overlap", overlapped, serial);
    shardwise::log::info(
        "  compute alone ", compute_only * 1e3, " ms; communication hidden by overlap: ",
        std::max(0.0, (serial - overlapped) / std::max(1e-9, serial - compute_only)) * 100,
        " %  (checksum ", sink > 0 ? "ok" : "?", ")");
    print_algorithm_sweep(world, o.iters, static_cast<std::size_t>(n / p) * sizeof(float));
    print_distance(world, n, o.iters);
    return 0;
  });
}
