// `shardwise train --config FILE.yaml [section.key=value ...]`: the main job. Launch with
// `mpirun -np N shardwise train ...` (or srun); without a launcher it runs as dp=1.
// Checkpoints: `--save DIR [--save-interval N] [--keep-last K]` writes DIR/step-0000100/ and the
// DIR/latest pointer; `--load DIR [--load-step S]` resumes (DIR may also be a step directory),
// at any data-parallel size.
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli_integer.hpp"
#include "comm_timeout_option.hpp"
#include "command_registry.hpp"
#include "launch_env.hpp"
#include "shardwise/checkpoint/checkpoint.hpp"
#include "shardwise/comm/mpi_process_group.hpp"
#include "shardwise/config/training_config.hpp"
#include "shardwise/core/checked_size.hpp"
#include "shardwise/core/command_paths.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/core/message_text.hpp"
#include "shardwise/train/trainer.hpp"

namespace shardwise::cli {
namespace {

struct TrainArgs {
  std::string config;
  std::vector<std::string> overrides;
  std::string log_jsonl;
  std::string plot;
  std::string save_dir;
  std::int64_t save_interval = 0;
  int keep_last = 0;
  std::string load_dir;
  std::int64_t load_step = -1;
  double comm_timeout = kDefaultCommTimeoutSeconds;
  std::string progress = "auto";
};

// Every file the job reads or writes, checked together before any work (no output may be an
// input or another output; see core/command_paths.hpp).
void check_train_paths(const TrainArgs& args, const TrainingConfig& config) {
  std::vector<CommandPath> paths = {{"--config", args.config, PathUse::kReadFile},
                                    {"data.path", config.data.path, PathUse::kReadFile},
                                    {"data.val_path", config.data.val_path, PathUse::kReadFile},
                                    {"--log-jsonl", args.log_jsonl, PathUse::kWriteFile},
                                    {"--plot", args.plot, PathUse::kWriteFile},
                                    {"--save", args.save_dir, PathUse::kWriteIntoDirectory}};
  if (!args.load_dir.empty()) {
    const std::optional<std::int64_t> step =
        args.load_step >= 0 ? std::optional<std::int64_t>(args.load_step) : std::nullopt;
    const std::filesystem::path root = args.load_dir;
    paths.push_back({"--load", resolve_checkpoint_directory(root, step), PathUse::kReadTree});
    paths.push_back({"--load", root / kCheckpointLatestFile, PathUse::kReadFile});
  }
  check_command_paths(paths);
}

ProgressMode parse_progress_mode(const std::string& value) {
  if (value == "auto") return ProgressMode::kAuto;
  if (value == "on") return ProgressMode::kOn;
  if (value == "off") return ProgressMode::kOff;
  throw InvalidArgument(
      str_cat("--progress: expected auto, on or off, got '", printable(value), "'"));
}

const bool registered = register_command(
    "train", "Train the reference GPT data-parallel (run under mpirun for several ranks)",
    [](CLI::App& app) {
      auto args = std::make_shared<TrainArgs>();
      app.add_option("--config", args->config, "Training config (YAML)")->required();
      app.add_option("overrides", args->overrides, "Overrides: section.key=value ...");
      app.add_option("--log-jsonl", args->log_jsonl, "Write one JSON object per step/eval");
      app.add_option("--plot", args->plot, "Write the loss curve(s) as SVG");
      auto* save = app.add_option("--save", args->save_dir,
                                  "Save checkpoints under DIR (DIR/step-NNNNNNN, DIR/latest); "
                                  "always after the last step");
      app.add_option("--save-interval", args->save_interval, "Also save every N steps")
          ->needs(save)
          ->check(integer_in(1, kMaxStep));
      app.add_option("--keep-last", args->keep_last,
                     "Keep only the newest K checkpoints under --save DIR")
          ->needs(save)
          ->check(integer_in(1, 1 << 20));
      auto* load = app.add_option("--load", args->load_dir,
                                  "Resume from a checkpoint: DIR (its latest), or a step "
                                  "directory");
      app.add_option("--load-step", args->load_step, "With --load DIR: resume from step S")
          ->needs(load)
          ->check(integer_in(0, kMaxStep));
      add_comm_timeout_option(app, args->comm_timeout);
      app.add_option("--progress", args->progress,
                     "Progress bar on rank 0: auto (default: when logging.progress is on and "
                     "stdout is your terminal, not under mpirun), on (also into files and "
                     "pipes; at most 4 redraws a second), off (a line every "
                     "logging.log_interval steps)");
      return [args] {
        const ProgressMode progress = parse_progress_mode(args->progress);
        // Parse before touching MPI so a bad config fails fast with exit 2 on every rank, and is
        // reported once per job (by rank 0).
        validate_comm_timeout(args->comm_timeout, "--comm-timeout");
        const std::optional<TrainingConfig> config =
            load_config_once_per_job(args->config, args->overrides);
        if (!config) return 2;
        if (!check_once_per_job([&] { check_train_paths(*args, *config); })) return 2;
        note_missing_launcher();
        return run_rank_main([&] {
          TrainerOptions options;
          options.log_jsonl = args->log_jsonl;
          options.progress = progress;
          options.plot = args->plot;
          options.save_dir = args->save_dir;
          options.save_interval = args->save_interval;
          options.keep_last = args->keep_last;
          options.load_dir = args->load_dir;
          if (args->load_step >= 0) options.load_step = args->load_step;
          // The trainer's groups are split from the world and inherit its timeout.
          run_training(*config, init_mpi_world(ProcessGroupOptions{args->comm_timeout}), options);
          return 0;
        });
      };
    });

}  // namespace
}  // namespace shardwise::cli
