// The MPI process group side by side with raw MPI calls, in one run:
//   overhead  all_reduce / reduce_scatter / all_gather through ProcessGroup (issue + wait) vs the
//             same MPI call made directly on MPI_COMM_WORLD;
//   bf16      a bf16 all_reduce (fp32 accumulation: widen, fp32 MPI_SUM, round once) vs a raw
//             fp32 MPI_Allreduce of the same element count;
//   overlap   compute + all_reduce issued before the compute and waited after, vs blocking
//             MPI_Allreduce followed by the compute.
//
//   mpirun -np 4 bench_comm_collectives [--numel 4194304] [--iters 10] [--passes 8]
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "shardwise/comm/mpi_process_group.hpp"
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
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
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
    return 0;
  });
}
