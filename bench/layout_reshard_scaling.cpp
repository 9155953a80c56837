// Scaling of `shardwise layout` and `shardwise reshard` in the parameter / tensor count: each is
// timed at N and N/4 (a linear cost grows ~4x, a quadratic one ~16x) next to a baseline measured
// in the same run on the same input:
//   layout: the CLI's steps (spec file read and parsed, layer-wise layout with overlap-aware cuts,
//     validation, stats, text report) for a GPT-like spec of N params (10 per layer, hidden 64,
//     a tied embedding), dp 64, Megatron's bucket size; baseline: reading and parsing the spec
//     file alone (load_model_spec), which any layout of it has to do.
//   reshard: `shardwise reshard --checkpoint FILE --tp 2 --out DIR` (the CLI binary, run as a
//     command) for a safetensors file of N small fp32 tensors named like a GPT's; baseline:
//     `shardwise convert --to mxfp8 --include '^$' FILE OUT` of the same file: every tensor read
//     and written once, none selected for conversion.
// Wall time of one run each (these are minutes-long figures on a loaded machine, not microbench
// noise). Prints
//   bench: layout_<N>_params seconds= baseline_spec_parse= ratio= growth_4x=
//   bench: reshard_<N>_tensors seconds= baseline_convert= ratio= growth_4x=
//
//   bench_layout_reshard_scaling [--params 1000000] [--tensors 1000000] [--dir /tmp]
//                                [--shardwise PATH (default: the shardwise next to this bench)]
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "bench_harness.hpp"
#include "shardwise/checkpoint/safetensors.hpp"
#include "shardwise/layout/layout_algorithms.hpp"
#include "shardwise/layout/layout_report.hpp"
#include "shardwise/layout/layout_stats.hpp"
#include "shardwise/layout/model_spec.hpp"

namespace {

using namespace shardwise;
namespace fs = std::filesystem;

struct Options {
  std::int64_t params = 1'000'000;
  std::int64_t tensors = 1'000'000;
  std::string dir = "/tmp";
  std::string shardwise;  // the CLI binary; default: next to this bench
};

// The per-layer params of a small GPT (hidden h), in forward order.
std::vector<std::pair<std::string, std::vector<std::int64_t>>> layer_params(std::int64_t h) {
  return {{"input_layernorm.weight", {h}}, {"attention.qkv.weight", {3 * h, h}},
          {"attention.qkv.bias", {3 * h}}, {"attention.proj.weight", {h, h}},
          {"attention.proj.bias", {h}},    {"post_attention_layernorm.weight", {h}},
          {"mlp.fc1.weight", {4 * h, h}},  {"mlp.fc1.bias", {4 * h}},
          {"mlp.fc2.weight", {h, 4 * h}},  {"mlp.fc2.bias", {h}}};
}

ModelSpec gpt_like_spec(std::int64_t n) {
  ModelSpec spec;
  spec.name = str_cat("gpt-like-", n);
  ParamInfo embedding;
  embedding.name = "embedding.word_embeddings.weight";
  embedding.shape = {1024, 64};
  embedding.shared_embedding = true;
  spec.params.push_back(embedding);
  const auto per_layer = layer_params(64);
  for (std::int64_t layer = 0; static_cast<std::int64_t>(spec.params.size()) < n; ++layer) {
    for (const auto& [name, shape] : per_layer) {
      if (static_cast<std::int64_t>(spec.params.size()) >= n) break;
      ParamInfo p;
      p.name = str_cat("layers.", layer, ".", name);
      p.shape = shape;
      spec.params.push_back(std::move(p));
    }
  }
  return spec;
}

struct Timing {
  double ours = 0, baseline = 0;
};

// As `shardwise layout --model FILE --dp 64` does it.
Timing time_layout(const fs::path& spec_file) {
  Timing t;
  t.baseline = bench::seconds_of([&] { (void)load_model_spec(spec_file); });
  t.ours = bench::seconds_of([&] {
    const ModelSpec spec = load_model_spec(spec_file);
    LayoutOptions options;
    options.data_parallel_size = 64;
    options.bucket_size = 64'000'000;  // max(40M, 1M x dp)
    const FullParamLayout layout = compute_full_param_layout(spec.params, options);
    validate_full_layout(spec.params, layout, options);
    const LayoutStats stats = compute_layout_stats(spec.params, layout, options);
    const LayoutReportInput report{spec.name, &spec.params, &layout, &options, &stats, nullptr};
    const std::string text = render_layout_text(report, TextReportOptions{24, 16});
    SW_CHECK(!text.empty(), "empty layout report");
  });
  return t;
}

void write_tensor_file(const fs::path& path, std::int64_t n) {
  const auto per_layer = layer_params(4);  // tiny tensors: the cost is per tensor
  std::vector<float> values(16 * 4, 0.5f);
  SafetensorsWriter writer;
  for (std::int64_t i = 0; i < n; ++i) {
    const auto& [name, shape] = per_layer[static_cast<std::size_t>(i) % per_layer.size()];
    writer.add(str_cat("layers.", i / static_cast<std::int64_t>(per_layer.size()), ".", name),
               DType::kFloat32, shape, static_cast<const void*>(values.data()));
  }
  writer.write_atomic(path);
}

// Runs the CLI: the export's per-tensor table handling (header or side file) lives there.
double seconds_of_command(const std::string& command) {
  int status = 0;
  const double seconds = bench::seconds_of([&] { status = std::system(command.c_str()); });
  SW_REQUIRE(status == 0, InvalidArgument, "bench_layout_reshard_scaling: '", command,
             "' failed (status ", status, ")");
  return seconds;
}

Timing time_reshard(const fs::path& shardwise, const fs::path& input, const fs::path& work) {
  Timing t;
  const std::string cli = shardwise.string();
  t.baseline =
      seconds_of_command(str_cat(cli, " convert --to mxfp8 --include '^$' ", input.string(), " ",
                                 (work / "copy.safetensors").string(), " > /dev/null"));
  t.ours = seconds_of_command(str_cat(cli, " reshard --checkpoint ", input.string(),
                                      " --tp 2 --out ", (work / "tp2").string(), " > /dev/null"));
  fs::remove_all(work / "tp2");
  fs::remove(work / "copy.safetensors");
  return t;
}

void report(const char* figure, std::int64_t n, const char* unit, const char* baseline,
            const Timing& small, const Timing& full) {
  std::printf("  %s at %lld: %.2f s (baseline %.2f s); at %lld: %.2f s (baseline %.2f s)\n", figure,
              static_cast<long long>(n / 4), small.ours, small.baseline, static_cast<long long>(n),
              full.ours, full.baseline);
  std::printf("bench: %s_%lld_%s seconds=%.3f baseline_%s=%.3f ratio=%.2f growth_4x=%.2f\n", figure,
              static_cast<long long>(n), unit, full.ours, baseline, full.baseline,
              full.ours / full.baseline, full.ours / small.ours);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    Options o;
    bench::parse_bench_options("bench_layout_reshard_scaling", argc, argv,
                               {{"--params", &o.params},
                                {"--tensors", &o.tensors},
                                {"--dir", &o.dir},
                                {"--shardwise", &o.shardwise}});
    if (o.shardwise.empty()) o.shardwise = (fs::path(argv[0]).parent_path() / "shardwise").string();
    SW_REQUIRE(fs::is_regular_file(o.shardwise), InvalidArgument,
               "bench_layout_reshard_scaling: no ", o.shardwise,
               " (build the CLI, or pass --shardwise PATH)");
    SW_REQUIRE(o.params >= 8 && o.tensors >= 8, InvalidArgument,
               "bench_layout_reshard_scaling: --params and --tensors must be >= 8");
    const fs::path work = fs::path(o.dir) / str_cat("shardwise_scaling_bench_", ::getpid());
    fs::create_directories(work);
    Timing layout[2], resharding[2];
    for (int i = 0; i < 2; ++i) {
      const std::int64_t params = i == 0 ? o.params / 4 : o.params;
      save_model_spec(gpt_like_spec(params), work / "spec.json");
      layout[i] = time_layout(work / "spec.json");
      const std::int64_t tensors = i == 0 ? o.tensors / 4 : o.tensors;
      write_tensor_file(work / "tensors.safetensors", tensors);
      resharding[i] = time_reshard(o.shardwise, work / "tensors.safetensors", work);
    }
    fs::remove_all(work);
    report("layout", o.params, "params", "spec_parse", layout[0], layout[1]);
    report("reshard", o.tensors, "tensors", "convert", resharding[0], resharding[1]);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_layout_reshard_scaling: %s\n", e.what());
    return 2;
  }
}
