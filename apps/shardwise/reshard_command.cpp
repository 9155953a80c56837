// `shardwise reshard --checkpoint DIR [--step S] --tp N [--mxfp8] --out DIR2`: offline
// tensor-parallel export.
// Reads the model.safetensors of the checkpoint DIR names (a --save root: its latest step, or
// --step S; a step directory; or DIR itself when it is a .safetensors file) and writes one file
// per TP rank, DIR2/tp-rank-RR-of-NN.safetensors, holding that rank's slice of every param by the
// Megatron rules (see reshard/tp_rules.hpp); with --mxfp8 the 2-D non-embedding weights are stored
// as NAME (F8_E4M3) + NAME_scale (F8_E8M0). DIR2 appears complete or not at all (built in a temp
// directory, then renamed).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint_weights_path.hpp"
#include "cli_integer.hpp"
#include "cli_path.hpp"
#include "command_registry.hpp"
#include "shardwise/checkpoint/checkpoint.hpp"
#include "shardwise/checkpoint/safetensors.hpp"
#include "shardwise/core/atomic_file.hpp"
#include "shardwise/core/checked_size.hpp"
#include "shardwise/core/command_paths.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/core/message_text.hpp"
#include "shardwise/reshard/tp_export.hpp"

namespace shardwise::cli {
namespace {

// One output file per TP rank: far above any real TP size (8 to 64), far below a directory of
// millions of files.
constexpr std::int64_t kMaxTensorParallelExport = 4096;

struct ReshardArgs {
  std::string checkpoint;
  std::string out;
  int tp = 0;
  bool mxfp8 = false;
  std::string dtype = "keep";
  std::string scale_rule;  // empty: ceil
  bool overwrite = false;
  std::int64_t step = -1;
};

// --checkpoint: a .safetensors file, a directory holding model.safetensors, or a checkpoint
// root / step directory resolved as `train --load` does (--step choosing the step).
std::filesystem::path weights_file(const ReshardArgs& args) {
  return checkpoint_weights_file(
      args.checkpoint, args.step >= 0 ? std::optional<std::int64_t>(args.step) : std::nullopt);
}

// The rank file's metadata. The per-tensor table goes into the header when it fits the format's
// header limit, else into TARGET's name with .tensors.json, named by kTpExportTensorsFileKey.
void set_export_metadata(SafetensorsWriter& writer, std::map<std::string, std::string> meta,
                         const std::filesystem::path& target) {
  std::string table = std::move(meta.at("tensors"));
  meta.erase("tensors");
  for (auto& [key, value] : meta) writer.set_metadata(key, std::move(value));
  // As a JSON string the table (itself JSON: no control characters) gains a backslash per '"'
  // and '\\'; plus the key and separators.
  const std::uint64_t table_bytes =
      table.size() + static_cast<std::uint64_t>(std::count(table.begin(), table.end(), '"')) +
      static_cast<std::uint64_t>(std::count(table.begin(), table.end(), '\\')) + 16;
  if (writer.header().size() + table_bytes <= kSafetensorsMaxHeaderBytes) {
    writer.set_metadata("tensors", std::move(table));
    return;
  }
  std::filesystem::path sidecar = target;
  sidecar.replace_extension(".tensors.json");
  write_file_atomic(sidecar, table);
  writer.set_metadata(kTpExportTensorsFileKey, sidecar.filename().string());
}

// What reshard writes into --out: tp-rank-NN-of-MM.safetensors and, for a per-tensor table too
// large for the header, tp-rank-NN-of-MM.tensors.json.
bool is_reshard_output_name(const std::string& name) {
  const auto digits = [&](std::size_t& at) {
    const std::size_t start = at;
    while (at < name.size() && name[at] >= '0' && name[at] <= '9') ++at;
    return at > start;
  };
  std::size_t at = 0;
  if (!name.starts_with("tp-rank-")) return false;
  at = 8;
  if (!digits(at) || name.compare(at, 4, "-of-") != 0) return false;
  at += 4;
  if (!digits(at)) return false;
  const std::string rest = name.substr(at);
  return rest == ".safetensors" || rest == ".tensors.json";
}

// --overwrite replaces an earlier reshard output (or an empty directory), never a directory of
// other files: a training checkpoint root given as --out by mistake was removed whole.
void require_replaceable_output(const std::filesystem::path& out) {
  namespace fs = std::filesystem;
  std::error_code ec;
  // check_command_paths has already refused an --out that exists and is not a directory.
  if (!fs::is_directory(fs::symlink_status(out, ec))) return;
  for (const fs::directory_entry& entry : fs::directory_iterator(out)) {
    const std::string name = entry.path().filename().string();
    SW_REQUIRE(is_reshard_output_name(name) && entry.is_regular_file(ec), IoError, "--out ",
               quoted(out), " holds '", printable(name),
               "', which reshard does not write; --overwrite replaces only an earlier reshard "
               "output (or an empty directory): give another --out");
  }
}

TpExportOptions export_options(const ReshardArgs& args) {
  TpExportOptions options;
  SW_REQUIRE(args.tp >= 1, InvalidArgument, "--tp: must be >= 1, got ", args.tp);
  options.tp = args.tp;
  options.mxfp8 = args.mxfp8;
  if (args.dtype != "keep") {
    const std::optional<DType> dtype = parse_dtype(args.dtype);
    SW_REQUIRE(dtype && is_export_dtype(*dtype), InvalidArgument, "--dtype: '",
               printable(args.dtype), "' is not an export dtype (valid: keep, fp32, bf16, fp16)");
    options.dtype = dtype;
  }
  SW_REQUIRE(args.scale_rule.empty() || args.mxfp8, InvalidArgument,
             "--scale-rule: applies to --mxfp8 exports only (add --mxfp8, or leave it out)");
  if (args.scale_rule.empty() || args.scale_rule == "ceil") {
    options.mxfp8_options.rule = Mxfp8ScaleRule::kCeil;
  } else if (args.scale_rule == "floor") {
    options.mxfp8_options.rule = Mxfp8ScaleRule::kFloor;
  } else {
    throw InvalidArgument(
        str_cat("--scale-rule: unknown rule '", args.scale_rule, "' (valid: ceil, floor)"));
  }
  return options;
}

// Megatron splits attention by whole heads (num_attention_heads % tp == 0): another --tp would
// cut heads apart in qkv, an export no TP engine runs. The head count is known where the weights
// are a checkpoint step's (its manifest's config.model.heads); a bare weights file has none.
void require_tp_divides_saved_heads(const std::filesystem::path& weights, int tp) {
  const std::filesystem::path step_dir = weights.parent_path();
  std::error_code ec;
  if (weights.filename() != kCheckpointModelFile ||
      !std::filesystem::exists(step_dir / kCheckpointManifestFile, ec)) {
    return;
  }
  const nlohmann::json manifest = read_checkpoint_manifest(step_dir);
  const nlohmann::json* model = saved_model_config(manifest);
  if (model == nullptr || !model->contains("heads")) return;
  const nlohmann::json& heads = model->at("heads");
  if (!heads.is_number_integer() || heads.get<std::int64_t>() < 1) return;
  SW_REQUIRE(heads.get<std::int64_t>() % tp == 0, InvalidArgument, "--tp ", tp,
             " does not divide the checkpoint's ", heads.get<std::int64_t>(),
             " attention heads (config.model.heads of ", quoted(step_dir / kCheckpointManifestFile),
             "): tensor parallelism splits attention by whole heads");
}

int run_reshard(const ReshardArgs& args) {
  namespace fs = std::filesystem;
  const TpExportOptions options = export_options(args);
  // The output is checked (and its parent created and probed) before the input is read, and
  // must not hold the input (--overwrite would remove it).
  const fs::path out = args.out;
  std::error_code ec;
  SW_REQUIRE(args.overwrite || !fs::exists(fs::symlink_status(out, ec)), IoError, "--out ",
             out.string(), " already exists (pass --overwrite to replace it)");
  // Replacing the directory the command runs in (or one above it) fails at the very end, after
  // every file was written (rename(2) refuses "."), or leaves the shell in a removed directory.
  SW_REQUIRE(!path_within(fs::current_path(), out), IoError, "--out ", quoted(out),
             " is the current directory or contains it; it would be replaced as a whole: give "
             "another directory");
  const fs::path input = weights_file(args);
  check_command_paths(
      {{"--checkpoint", input, PathUse::kReadFile}, {"--out", out, PathUse::kReplaceDirectory}});
  if (args.overwrite) require_replaceable_output(out);
  require_tp_divides_saved_heads(input, options.tp);
  const SafetensorsFile file = SafetensorsFile::open(input);
  require_whole_model_weights(file);
  std::vector<SourceTensor> tensors;
  for (const SafetensorsTensorInfo& info : file.tensors()) {
    tensors.push_back({info.name, info.dtype, info.shape, file.tensor(info.name).data});
  }
  check_tp_export(tensors, options);  // every error before anything is written

  const fs::path staged = create_temp_directory_next_to(out);
  std::uint64_t total_bytes = 0;
  try {
    for (int rank = 0; rank < options.tp; ++rank) {
      const std::vector<ExportedTensor> exported = export_tp_rank(tensors, options, rank);
      SafetensorsWriter writer;
      for (const ExportedTensor& t : exported) writer.add(t.name, t.dtype, t.shape, t.bytes.data());
      const fs::path target = staged / tp_export_file_name(rank, options.tp);
      set_export_metadata(writer, tp_export_metadata(tensors, options, rank), target);
      writer.write_atomic(target);
      // The written size, not writer.file_bytes(): that builds the whole header again.
      const std::uint64_t bytes = fs::file_size(target);
      total_bytes += bytes;
      std::printf("wrote %s: %zu tensors, %llu bytes\n", (out / target.filename()).string().c_str(),
                  exported.size(), static_cast<unsigned long long>(bytes));
    }
    commit_directory(staged, out, args.overwrite);
  } catch (...) {
    fs::remove_all(staged, ec);
    throw;
  }
  std::printf("resharded %zu params from %s to tp=%d%s: %llu bytes in %s\n", tensors.size(),
              input.string().c_str(), options.tp, options.mxfp8 ? " (mxfp8)" : "",
              static_cast<unsigned long long>(total_bytes), out.string().c_str());
  return 0;
}

const bool registered = register_command(
    "reshard",
    "Export a checkpoint's weights as per-TP-rank safetensors files (Megatron TP rules, MXFP8)",
    [](CLI::App& app) {
      auto args = std::make_shared<ReshardArgs>();
      app.add_option("--checkpoint", args->checkpoint,
                     "Checkpoint: a --save root (its latest step), a step directory, or a "
                     ".safetensors file")
          ->required()
          ->check(non_empty_path());
      app.add_option("--step", args->step, "With a --save root: export this step")
          ->check(integer_in(0, kMaxStep));
      app.add_option("--tp", args->tp, "Tensor-parallel size of the export")
          ->required()
          ->check(integer_in(1, kMaxTensorParallelExport));
      app.add_option("--out", args->out, "Output directory (must not exist)")
          ->required()
          ->check(non_empty_path());
      app.add_flag("--mxfp8", args->mxfp8,
                   "Store the 2-D non-embedding weights as MXFP8 (NAME + NAME_scale)");
      app.add_option("--dtype", args->dtype,
                     "Dtype of the other float tensors: keep (default), fp32, bf16, fp16");
      app.add_option("--scale-rule", args->scale_rule, "MXFP8 scale rule: ceil (default), floor");
      app.add_flag("--overwrite", args->overwrite, "Replace --out if it exists");
      return [args] { return run_reshard(*args); };
    });

}  // namespace
}  // namespace shardwise::cli
