// Checkpoint save/load throughput next to raw sequential write()/read() of the same bytes, in the
// same directory and the same run.
//
//   bench_checkpoint_io [dir=/tmp] [model_megabytes=128] [repeats=3]
//
// The checkpoint is of an AdamW optimizer over 8 fp32 tensors of model_megabytes in total, so one
// save writes ~4x that (model.safetensors + main params + exp_avg + exp_avg_sq) plus the manifest.
// Save = save_checkpoint (staging directory, one file per rank + model file, fsync of every file,
// rename into place, `latest` pointer). Its limit (machine_limits.hpp) writes the same files'
// bytes with write() into fresh files in the same parent directory, fsyncs each and the
// directory: the cost of durability without the format or the publish protocol. Load =
// load_checkpoint (manifest, validation of every file, model weights and optimizer shards through
// read_range) into caller memory; its limit read()s the same files into buffers. Both are timed
// cold: the files are dropped from the page cache (posix_fadvise DONTNEED) first; the warm pair
// is printed too. Each figure is the best of the repeats (wall time). Prints
//   bench: checkpoint_save ... / bench: checkpoint_load ... (see machine_limits.hpp)
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench_harness.hpp"
#include "machine_limits.hpp"
#include "shardwise/checkpoint/checkpoint.hpp"
#include "shardwise/comm/mpi_process_group.hpp"
#include "shardwise/core/atomic_file.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/optim/adamw.hpp"

namespace {

namespace fs = std::filesystem;
using namespace shardwise;

using bench::best;
using bench::seconds_of;

struct Model {
  std::vector<std::string> names;
  std::vector<std::vector<float>> values, grads;
  std::unique_ptr<optim::AdamW> optimizer;

  Model(std::int64_t rows, int tensors, std::uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    std::vector<optim::OptimParam> params;
    for (int i = 0; i < tensors; ++i) {
      names.push_back(str_cat("layers.", i, ".weight"));
      values.emplace_back(static_cast<std::size_t>(rows * 1024));
      grads.emplace_back(static_cast<std::size_t>(rows * 1024));
      for (float& v : values.back()) v = uniform(rng);
      for (float& g : grads.back()) g = uniform(rng);
    }
    for (int i = 0; i < tensors; ++i) {
      params.push_back({names[i], {rows, 1024}, values[i].data(), grads[i].data(), {}});
    }
    optimizer = std::make_unique<optim::AdamW>(optim::single_group(std::move(params)),
                                               optim::AdamWOptions{});
  }
  std::vector<ModelTensor> tensors() {
    std::vector<ModelTensor> out;
    for (std::size_t i = 0; i < names.size(); ++i) {
      out.push_back({names[i],
                     {static_cast<std::int64_t>(values[i].size() / 1024), 1024},
                     TensorView{values[i].data(), static_cast<std::int64_t>(values[i].size()),
                                DType::kFloat32}});
    }
    return out;
  }
};

}  // namespace

int main(int argc, char** argv) {
  try {
    const fs::path base = argc > 1 ? argv[1] : "/tmp";
    const std::int64_t megabytes = argc > 2 ? std::atoll(argv[2]) : 128;
    const int repeats = argc > 3 ? std::atoi(argv[3]) : 3;
    const ProcessGroupPtr world = init_mpi_world();
    SW_REQUIRE(world->size() == 1, InvalidArgument, "bench_checkpoint_io runs on one rank");
    constexpr int kTensors = 8;
    const std::int64_t rows =
        std::max<std::int64_t>(1, megabytes * (1 << 20) / 4 / 1024 / kTensors);
    Model model(rows, kTensors, 1);
    model.optimizer->step();  // real (non-zero) state
    Model target(rows, kTensors, 2);

    const fs::path root = base / str_cat("bench_checkpoint_io.", ::getpid());
    const fs::path raw_dir = base / str_cat("bench_checkpoint_io_raw.", ::getpid());
    fs::create_directories(raw_dir);
    std::vector<double> save_s, write_s, load_s, read_s, warm_load_s, warm_read_s;
    std::uint64_t bytes = 0;
    std::size_t file_count = 0;
    bool cold = true;  // every checkpoint file could be dropped from the page cache
    for (int r = 0; r < repeats; ++r) {
      CheckpointSaveRequest request;
      request.root = root;
      request.step = r + 1;
      request.keep_last = 1;
      request.optimizer_kind = "ddp";
      fs::path dir;
      const auto save = [&] {
        return seconds_of(
            [&] { dir = save_checkpoint(request, model.tensors(), *model.optimizer, *world); });
      };
      const double first_save = save();

      // The same bytes, file by file, outside the timed regions.
      std::vector<std::pair<std::string, std::vector<char>>> files;
      std::vector<fs::path> paths;
      std::vector<std::vector<char>> buffers;
      bytes = 0;
      for (const auto& e : fs::directory_iterator(dir)) {
        paths.push_back(e.path());
        buffers.emplace_back(static_cast<std::size_t>(e.file_size()));
        bytes += buffers.back().size();
      }
      bench::read_files_seconds(paths, buffers);
      for (std::size_t i = 0; i < paths.size(); ++i) {
        files.emplace_back(paths[i].filename().string(), buffers[i]);
      }
      // Alternate the order of the two writes between repeats, so neither always runs first
      // (write-back of the other's dirty pages, caches).
      if (r % 2 == 0) {
        save_s.push_back(first_save);
        write_s.push_back(bench::write_fsync_seconds(raw_dir, files));
      } else {
        write_s.push_back(bench::write_fsync_seconds(raw_dir, files));
        save_s.push_back(save());  // replaces the step directory (same step)
      }
      const auto drop = [&] {
        for (const fs::path& path : paths) cold = bench::drop_from_page_cache(path) && cold;
      };
      const auto load = [&] {
        return seconds_of([&] {
          load_checkpoint(resolve_checkpoint_directory(root), target.tensors(), *target.optimizer,
                          *world, "ddp");
        });
      };
      drop();
      load_s.push_back(load());
      drop();
      read_s.push_back(bench::read_files_seconds(paths, buffers));
      warm_load_s.push_back(load());
      warm_read_s.push_back(bench::read_files_seconds(paths, buffers));
      file_count = files.size();
      SW_CHECK(target.values == model.values, "loaded weights differ from the saved ones");
    }
    fs::remove_all(root);
    fs::remove_all(raw_dir);

    const double gb = static_cast<double>(bytes) / 1e9;
    std::printf(
        "checkpoint of %lld MB of fp32 weights + AdamW state: %.1f MB in %zu files, "
        "best of %d; load figure %s\n",
        static_cast<long long>(megabytes), static_cast<double>(bytes) / 1e6, file_count, repeats,
        cold ? "cold (files dropped from the page cache before load and read)"
             : "warm (the page cache could not be dropped)");
    std::printf("  warm load %.3f GB/s vs warm read %.3f GB/s (ratio %.3f)\n",
                gb / best(warm_load_s), gb / best(warm_read_s),
                best(warm_read_s) / best(warm_load_s));
    // Each limit is the best of its repeats (interleaved with ours), printed with their spread.
    bench::print_figure("checkpoint_save", gb / best(save_s),
                        bench::ProbeSamples::of_seconds(gb, write_s), "GB/s");
    bench::print_figure("checkpoint_load", gb / best(load_s),
                        bench::ProbeSamples::of_seconds(gb, read_s), "GB/s");
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_checkpoint_io: %s\n", e.what());
    return 2;
  }
}
