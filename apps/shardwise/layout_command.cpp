// `shardwise layout`: computes the optimizer's parameter layout for a model spec and shows it as a
// text table, JSON, and optionally an SVG picture (buckets x shards, one box per param).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "cli_bool.hpp"
#include "cli_integer.hpp"
#include "cli_path.hpp"
#include "command_registry.hpp"
#include "shardwise/core/checked_size.hpp"
#include "shardwise/core/command_paths.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/core/message_text.hpp"
#include "shardwise/layout/layout_algorithms.hpp"
#include "shardwise/layout/layout_report.hpp"
#include "shardwise/layout/layout_stats.hpp"
#include "shardwise/layout/model_spec.hpp"
#include "shardwise/layout/model_zoo.hpp"
#include "shardwise/layout/shard_group_choice.hpp"

namespace shardwise::cli {
namespace {

struct LayoutArgs {
  std::string model;
  int dp = 0;
  std::optional<int> expert_dp;
  std::string bucket_size = "megatron";
  std::string shard_group_size;  // empty = dp (one group)
  std::string optimizer = "layer-wise";
  bool all_layer_wise = false;
  bool high_nccl_busbw = false;
  bool overlap_aware_cuts = false;  // the default; the flag is still accepted
  bool plain_cuts = false;
  std::string grad_reduce_fp32 = "true";
  std::string format = "text";
  std::string svg;
  int max_rank_rows = 16;
  int max_bucket_rows = 24;
};

// A spec file, or a bundled preset name (any case) when no such file exists.
ModelSpec load_model(const std::string& model) {
  SW_REQUIRE(!model.empty(), InvalidArgument, "layout: --model is required");
  std::error_code ignored;
  const bool looks_like_path =
      model.find('/') != std::string::npos || std::filesystem::path(model).extension() == ".json";
  if (!std::filesystem::exists(model, ignored) && !looks_like_path) {
    if (is_bundled_model(model)) return bundled_model_spec(model);
    throw InvalidArgument(
        str_cat("--model: no spec file '", model, "' and ", unknown_bundled_model_message(model)));
  }
  ModelSpec spec = load_model_spec(model);
  if (spec.name.empty()) spec.name = std::filesystem::path(model).stem().string();
  return spec;
}

LayoutAlgorithm parse_optimizer(const std::string& name) {
  if (name == "layer-wise" || name == "layerwise") return LayoutAlgorithm::kLayerWise;
  if (name == "distributed") return LayoutAlgorithm::kDistributed;
  if (name == "none" || name == "ddp") return LayoutAlgorithm::kDefault;
  throw InvalidArgument(str_cat("--optimizer: unknown optimizer '", name,
                                "' (valid: layer-wise, distributed, none)"));
}

// "none" = one bucket per buffer; "megatron" = Megatron's default with overlapped grad reduce,
// max(40M, 1M * dp) elements; otherwise an element count.
std::optional<std::int64_t> parse_bucket_size(const std::string& value, int dp) {
  if (value == "none") return std::nullopt;
  if (value == "megatron") {
    return std::max<std::int64_t>(40'000'000, 1'000'000 * static_cast<std::int64_t>(dp));
  }
  std::size_t used = 0;
  std::int64_t size = 0;
  try {
    size = std::stoll(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  SW_REQUIRE(used == value.size() && !value.empty(), InvalidArgument,
             "--bucket-size: expected an element count, 'none' or 'megatron', got '",
             printable(value), "'");
  SW_REQUIRE(size >= 1, InvalidArgument, "--bucket-size must be >= 1 elements, got ", size);
  return size;
}

// "" = dp (one shard group), "auto" = chosen by the cost model, else a divisor of dp.
std::optional<int> parse_shard_group_size(const std::string& value) {
  if (value.empty() || value == "auto") return std::nullopt;
  std::size_t used = 0;
  int size = 0;
  try {
    size = std::stoi(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  SW_REQUIRE(used == value.size(), InvalidArgument,
             "--shard-group-size: expected a divisor of --dp or 'auto', got '", printable(value),
             "'");
  return size;
}

int run_layout(const LayoutArgs& args) {
  LayoutOptions options;
  options.algorithm = parse_optimizer(args.optimizer);
  SW_REQUIRE(args.dp >= 1, InvalidArgument, "--dp must be >= 1, got ", args.dp);
  SW_REQUIRE(!args.expert_dp || *args.expert_dp >= 1, InvalidArgument,
             "--expert-dp must be >= 1, got ", args.expert_dp.value_or(0));
  // These shape the layer-wise buffers only: with another --optimizer they were ignored.
  if (options.algorithm != LayoutAlgorithm::kLayerWise) {
    const char* layer_wise_only = !args.shard_group_size.empty() ? "--shard-group-size"
                                  : args.all_layer_wise          ? "--all-layer-wise"
                                  : args.plain_cuts              ? "--plain-cuts"
                                  : args.overlap_aware_cuts      ? "--overlap-aware-cuts"
                                                                 : nullptr;
    SW_REQUIRE(layer_wise_only == nullptr, InvalidArgument, layer_wise_only,
               " applies to the layer-wise optimizer only, not --optimizer ",
               printable(args.optimizer));
  }
  options.data_parallel_size = args.dp;
  options.expert_data_parallel_size = args.expert_dp;
  options.bucket_size = parse_bucket_size(args.bucket_size, args.dp);
  options.grad_reduce_in_fp32 = parse_bool_option(args.grad_reduce_fp32, "--grad-reduce-fp32");
  options.pad_buckets_for_high_nccl_busbw = args.high_nccl_busbw;
  options.all_layer_wise = args.all_layer_wise;
  SW_REQUIRE(!(args.plain_cuts && args.overlap_aware_cuts), InvalidArgument,
             "--plain-cuts and --overlap-aware-cuts cannot both be given");
  options.overlap_aware_cuts = !args.plain_cuts;
  options.layer_wise_shard_group_size = parse_shard_group_size(args.shard_group_size);
  SW_REQUIRE(args.format == "text" || args.format == "json", InvalidArgument,
             "--format: expected text or json, got '", args.format, "'");
  options.validate();

  // --svg is written last: check it (and that it is not the spec file) before the work.
  std::error_code ignored;
  check_command_paths({{"--model", std::filesystem::exists(args.model, ignored) ? args.model : "",
                        PathUse::kReadFile},
                       {"--svg", args.svg, PathUse::kWriteFile}});
  const ModelSpec spec = load_model(args.model);
  const bool has_experts = std::any_of(spec.params.begin(), spec.params.end(),
                                       [](const ParamInfo& p) { return p.expert_parallel; });
  SW_REQUIRE(!args.expert_dp || has_experts, InvalidArgument, "--expert-dp ", *args.expert_dp,
             ": the model has no expert_parallel params, the only ones it sizes");
  std::optional<ShardGroupChoice> choice;
  if (args.shard_group_size == "auto") {
    choice = choose_shard_group_size(spec.params, options);
    options.layer_wise_shard_group_size = choice->shard_group_size;
  }
  const FullParamLayout layout = compute_full_param_layout(spec.params, options);
  validate_full_layout(spec.params, layout, options);
  const LayoutStats stats = compute_layout_stats(spec.params, layout, options);
  const LayoutReportInput report{spec.name, &spec.params, &layout,
                                 &options,  &stats,       choice ? &*choice : nullptr};

  if (!args.svg.empty()) write_file_atomically(args.svg, render_layout_svg(report));
  const std::string text =
      args.format == "json"
          ? render_layout_json(report)
          : render_layout_text(report, TextReportOptions{args.max_bucket_rows, args.max_rank_rows});
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}

const bool registered = register_command(
    "layout", "Compute and show the optimizer's parameter/gradient buffer layout for a model",
    [](CLI::App& app) {
      auto args = std::make_shared<LayoutArgs>();
      app.add_option("--model,-m", args->model,
                     "Model spec JSON file, or a bundled preset name (e.g. llama3-8b)")
          ->required();
      app.add_option("--dp", args->dp, "Data-parallel size")
          ->required()
          ->check(integer_in(1, kMaxParallelSize));
      app.add_option("--expert-dp", args->expert_dp, "Expert data-parallel size (default: --dp)")
          ->check(integer_in(1, kMaxParallelSize));
      app.add_option("--bucket-size", args->bucket_size,
                     "Elements per bucket, 'none' (one bucket per buffer) or 'megatron' "
                     "(default: max(40M, 1M*dp), as Megatron with overlapped grad reduce)");
      app.add_option("--shard-group-size", args->shard_group_size,
                     "Layer-wise shard group size S (a divisor of --dp; default --dp, one group) "
                     "or 'auto' (least per-rank memory, then least comm; prints the table)")
          ->check(non_empty_value());
      app.add_option("--optimizer", args->optimizer, "layer-wise (default), distributed or none")
          ->check(non_empty_value());
      app.add_flag("--all-layer-wise", args->all_layer_wise,
                   "Shard-align every buffer, not only the Muon-managed ones");
      app.add_flag("--overlap-aware-cuts", args->overlap_aware_cuts,
                   "Cut layer-wise buckets by padding plus the last bucket's exposed "
                   "reduce-scatter bytes (the default)");
      app.add_flag("--plain-cuts", args->plain_cuts,
                   "Cut layer-wise buckets by padding only (the layouts from before "
                   "overlap-aware cuts)");
      app.add_flag("--high-nccl-busbw", args->high_nccl_busbw,
                   "Pad bucket ends to lcm(dp, 128, 2^16) for high NCCL bus bandwidth");
      app.add_option("--grad-reduce-fp32", args->grad_reduce_fp32,
                     "true (default) or false: reduce gradients in fp32");
      app.add_option("--format", args->format, "text (default) or json");
      app.add_option("--svg", args->svg, "Also draw the layout to this SVG file")
          ->check(non_empty_path());
      app.add_option("--max-rank-rows", args->max_rank_rows,
                     "Text format: rank rows shown before summarising")
          ->check(integer_in(0, kMaxParallelSize));
      app.add_option("--max-bucket-rows", args->max_bucket_rows,
                     "Text format: bucket rows shown per buffer before summarising")
          ->check(integer_in(0, kMaxParallelSize));
      return [args] { return run_layout(*args); };
    });

}  // namespace
}  // namespace shardwise::cli
