// `shardwise config`: inspect training configs and the TP-overlap presets.
//   shardwise config resolve [--config FILE.yaml] [section.key=value ...] [--format yaml|json]
//                            [--world-size N] [--gpu ARCH]
//     Loads the config, applies the overrides, resolves the communication-overlap settings for
//     N ranks on ARCH and prints the result: YAML (loadable again; the resolution follows as
//     comments; warnings on stderr) or JSON ({"config", "resolution", "tp_overlap_runtime",
//     "warnings"}). tp_overlap_runtime is what the MPI backend runs per GEMM slot (algorithm,
//     num_splits) and the GPU-only fields it does not apply
//     (include/shardwise/tp/overlap_plan.hpp).
//   shardwise config presets [--name NAME] [--format yaml|json]
//     Lists the userbuffers_* presets with what their names encode, or prints one preset.
// Config errors exit with code 2 (see main.cpp).
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "cli_integer.hpp"
#include "cli_path.hpp"
#include "command_registry.hpp"
#include "shardwise/config/comm_overlap_presets.hpp"
#include "shardwise/config/training_config.hpp"
#include "shardwise/core/checked_size.hpp"
#include "shardwise/core/logging.hpp"
#include "shardwise/tp/overlap_plan.hpp"

namespace shardwise::cli {
namespace {

struct ConfigOptions {
  std::string config_path;
  std::vector<std::string> overrides;
  std::string format = "yaml";
  int world_size = 1;
  std::string gpu = "none";
  std::string preset_name;
};

std::string commented(const std::string& text) {
  std::istringstream in(text);
  std::string out;
  for (std::string line; std::getline(in, line);) out += "# " + line + "\n";
  return out;
}

int run_resolve(const ConfigOptions& options) {
  const bool json = options.format == "json";
  // stdout carries the document: info lines stay quiet, warnings go to stderr in YAML mode and
  // into the document in JSON mode.
  log::set_level(json ? log::Level::kError : log::Level::kWarning);
  const GpuArch gpu = gpu_arch_from_name(options.gpu, "--gpu");
  TrainingConfig config = options.config_path.empty()
                              ? parse_training_config("", options.overrides, "<defaults>")
                              : load_training_config(options.config_path, options.overrides);
  const CommOverlapResolution resolution = resolve_comm_overlap(config, options.world_size, gpu);
  const tp::TpOverlapPlan runtime = tp::tp_overlap_plan(resolution);
  if (json) {
    nlohmann::ordered_json out = nlohmann::ordered_json::object();
    out["config"] = to_json(config);
    out["resolution"] = to_json(resolution);
    out["tp_overlap_runtime"] = tp::to_json(runtime);
    out["warnings"] = resolution.warnings;
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    std::printf("%s", to_yaml(config).c_str());
    std::printf("# resolution (world_size %d, gpu %s):\n%s", options.world_size,
                std::string(to_string(gpu)).c_str(),
                commented(json_to_yaml(to_json(resolution))).c_str());
    std::printf("# tp_overlap_runtime (MPI backend):\n%s",
                commented(json_to_yaml(tp::to_json(runtime))).c_str());
  }
  return 0;
}

nlohmann::ordered_json preset_key_json(const CommOverlapPresetKey& key) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  out["precision"] = key.precision;
  out["gpu"] = std::string(to_string(key.gpu));
  out["hidden"] = key.hidden;
  out["tp"] = key.tp;
  out["cp"] = key.cp;
  out["micro_batch_size"] = key.micro_batch_size;
  out["seq_length"] = key.seq_length;
  out["lora"] = key.lora;
  return out;
}

int run_presets(const ConfigOptions& options) {
  const bool json = options.format == "json";
  if (!options.preset_name.empty()) {
    const auto& cfg = comm_overlap_preset(options.preset_name);  // ConfigError: exit 2
    nlohmann::ordered_json out = nlohmann::ordered_json::object();
    out["name"] = options.preset_name;
    out["matches"] = preset_key_json(*parse_preset_name(options.preset_name));
    out["tp_comm_overlap_cfg"] = to_json(cfg);
    std::printf("%s", json ? (out.dump(2) + "\n").c_str() : json_to_yaml(out).c_str());
    return 0;
  }
  if (json) {
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    for (const auto& preset : comm_overlap_presets()) {
      nlohmann::ordered_json entry = nlohmann::ordered_json::object();
      entry["name"] = std::string(preset.name);
      entry["matches"] = preset_key_json(*parse_preset_name(preset.name));
      entry["tp_comm_overlap_cfg"] = to_json(preset.cfg);
      out.push_back(std::move(entry));
    }
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  std::printf("%-52s %-5s %-10s %6s %3s %3s %4s %7s %s\n", "# name", "prec", "gpu", "hidden", "tp",
              "cp", "mbs", "seqlen", "lora");
  for (const auto& preset : comm_overlap_presets()) {
    const auto key = *parse_preset_name(preset.name);
    std::printf("%-52s %-5s %-10s %6d %3d %3d %4d %7d %s\n", std::string(preset.name).c_str(),
                key.precision.c_str(), std::string(to_string(key.gpu)).c_str(), key.hidden, key.tp,
                key.cp, key.micro_batch_size, key.seq_length, key.lora ? "yes" : "no");
  }
  return 0;
}

const bool registered = register_command(
    "config", "Resolve training configs and list the TP-overlap presets", [](CLI::App& app) {
      auto options = std::make_shared<ConfigOptions>();
      app.require_subcommand(1);

      CLI::App* resolve =
          app.add_subcommand("resolve", "Print a training config with comm overlap resolved");
      resolve->add_option("--config,-c", options->config_path, "Training config YAML file")
          ->check(non_empty_path());
      resolve->add_option("overrides", options->overrides,
                          "Overrides as section.key=value (e.g. optimizer.lr=3e-4)");
      resolve->add_option("--format", options->format, "Output format")
          ->check(CLI::IsMember({"yaml", "json"}));
      resolve->add_option("--world-size", options->world_size, "Number of ranks")
          ->check(integer_in(1, kMaxParallelSize));
      resolve
          ->add_option("--gpu", options->gpu,
                       "GPU architecture or product (none, volta, ampere, hopper, blackwell, "
                       "h100, b200, ...)")
          ->check(non_empty_value());

      CLI::App* presets =
          app.add_subcommand("presets", "List the userbuffers_* TP-overlap presets");
      presets->add_option("--name", options->preset_name, "Print this preset's values")
          ->check(non_empty_value());
      presets->add_option("--format", options->format, "Output format")
          ->check(CLI::IsMember({"yaml", "json"}));

      return [options, resolve]() {
        return resolve->parsed() ? run_resolve(*options) : run_presets(*options);
      };
    });

}  // namespace
}  // namespace shardwise::cli
