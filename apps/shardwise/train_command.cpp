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
#include "cli_path.hpp"
#include "comm_timeout_option.hpp"
#include "command_registry.hpp"
#include "launch_env.hpp"
#include "new_directories.hpp"
#include "rank0_outputs_check.hpp"
#include "shardwise/checkpoint/checkpoint.hpp"
#include "shardwise/checkpoint/checkpoint_root_lock.hpp"
#include "shardwise/comm/mpi_process_group.hpp"
#include "shardwise/comm/settings_agreement.hpp"
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
  bool overwrite = false;
};

// The saves write, replace and prune their own entries of --save DIR (latest, .lock, step
// directories): an output there would be overwritten or deleted. Elsewhere in DIR is fine.
void check_outputs_clear_of_checkpoint_entries(const std::vector<CommandPath>& paths,
                                               const std::filesystem::path& save_dir) {
  for (const CommandPath& p : paths) {
    if (p.use != PathUse::kWriteFile || p.path.empty()) continue;
    const std::optional<std::filesystem::path> below = path_within(p.path, save_dir);
    if (!below || *below == ".") continue;
    const std::string entry = below->begin()->string();
    SW_REQUIRE(!is_checkpoint_root_entry(entry), IoError, p.option, " ", quoted(p.path),
               " lies inside --save ", quoted(save_dir), " at '", printable(entry, 256),
               "', which the checkpoint saves write, replace or prune: choose a path outside it");
  }
}

// Resuming from step S of --save DIR where steps after S are saved: those belong to the run that
// went on from S, and this one's would mix with them (`latest` and --keep-last go by step number,
// so the newer ones would be kept and the one resumed from pruned).
void check_no_steps_after_the_resumed_one(const TrainArgs& args,
                                          const std::vector<std::int64_t>& steps) {
  const std::optional<std::int64_t> requested =
      args.load_step >= 0 ? std::optional<std::int64_t>(args.load_step) : std::nullopt;
  std::filesystem::path directory =
      resolve_checkpoint_directory(args.load_dir, requested).lexically_normal();
  if (!directory.has_filename()) directory = directory.parent_path();  // "DIR/step-0000002/"
  const std::string resumed = directory.filename().string();
  std::vector<std::int64_t> later;
  for (auto it = steps.rbegin(); it != steps.rend() && step_directory_name(*it) != resumed; ++it) {
    later.insert(later.begin(), *it);
  }
  if (later.size() == steps.size()) return;  // not one of this root's steps
  if (later.empty()) return;
  throw IoError(str_cat(
      "--save ", shardwise::quoted(args.save_dir), " holds ",
      later.size() == 1 ? str_cat("step ", later.front())
                        : str_cat(later.size(), " steps, ", later.front(), "..", later.back()),
      " after '", resumed,
      "', the checkpoint this run resumes from: its saves would mix with that run's (`latest` and "
      "--keep-last go by step number). Move them away, resume from the newest, choose another "
      "--save directory, or pass --overwrite"));
}

// A run that does not resume from --save DIR would mix its checkpoints with the ones already
// there (another run's: `latest` moving back, --keep-last pruning them) unless --overwrite.
// Entries under the saves' names that are not checkpoints (a step directory without a manifest,
// a file named like one, a `latest` or `.lock` of something else) would be replaced, pruned or
// truncated just the same.
void check_save_root_is_this_runs(const TrainArgs& args) {
  if (args.overwrite) return;
  const std::vector<std::int64_t> steps = list_checkpoint_steps(args.save_dir);
  if (!args.load_dir.empty() && path_within(args.load_dir, args.save_dir)) {
    check_no_steps_after_the_resumed_one(args, steps);
    return;
  }
  if (steps.empty()) {
    const std::vector<std::string> entries = existing_checkpoint_root_entries(args.save_dir);
    if (entries.empty()) return;
    throw IoError(str_cat("--save ", shardwise::quoted(args.save_dir), " already holds '",
                          printable(entries.front(), 256), "'",
                          entries.size() > 1 ? str_cat(" (and ", entries.size() - 1, " more)") : "",
                          ", which is not a checkpoint of this run but has a name the checkpoint "
                          "saves write, replace or prune: move it, choose another --save "
                          "directory, or pass --overwrite"));
  }
  throw IoError(str_cat(
      "--save ", shardwise::quoted(args.save_dir), " already holds checkpoints (",
      steps.size() == 1 ? str_cat("step ", steps.front())
                        : str_cat(steps.size(), " steps, ", steps.front(), "..", steps.back()),
      ") that this run does not resume from; its saves would replace or prune them: resume "
      "with --load ",
      shardwise::quoted(args.save_dir), ", choose another --save directory, or pass --overwrite"));
}

// The metrics and plot files come from the flag, else from the config's logging section (the
// trainer's rule); either way they are checked, under the name the user gave them by.
CommandPath flag_or_config_output(const char* flag, const std::string& flag_value, const char* key,
                                  const std::string& config_value) {
  if (!flag_value.empty()) return {flag, flag_value, PathUse::kWriteFile};
  return {key, config_value, PathUse::kWriteFile};
}

// Every file the job reads or writes, checked together before any work (no output may be an
// input or another output; see core/command_paths.hpp).
void check_train_paths(const TrainArgs& args, const TrainingConfig& config) {
  std::vector<CommandPath> paths = {
      {"--config", args.config, PathUse::kReadFile},
      {"data.path", config.data.path, PathUse::kReadFile},
      {"data.val_path", config.data.val_path, PathUse::kReadFile},
      flag_or_config_output("--log-jsonl", args.log_jsonl, "logging.jsonl_path",
                            config.logging.jsonl_path),
      flag_or_config_output("--plot", args.plot, "logging.plot_path", config.logging.plot_path),
      {"--save", args.save_dir, PathUse::kWriteIntoDirectory}};
  if (!args.load_dir.empty()) {
    const std::optional<std::int64_t> step =
        args.load_step >= 0 ? std::optional<std::int64_t>(args.load_step) : std::nullopt;
    const std::filesystem::path root = args.load_dir;
    paths.push_back({"--load", resolve_checkpoint_directory(root, step), PathUse::kReadTree});
    paths.push_back({"--load", root / kCheckpointLatestFile, PathUse::kReadFile});
  }
  check_command_paths(paths);
  if (!args.save_dir.empty()) {
    check_outputs_clear_of_checkpoint_entries(paths, args.save_dir);
    check_save_root_is_this_runs(args);
  }
}

// What every rank must agree on: the resolved config and the options that shape the job's
// collectives and files (not rank 0's own outputs: --log-jsonl, --plot, --progress).
nlohmann::ordered_json job_settings(const TrainArgs& args, const TrainingConfig& config) {
  // First: ranks that run different subcommands are told so, not that some option is missing.
  nlohmann::ordered_json settings = {{"subcommand", "train"}};
  settings.update(to_json(config));  // "training.steps", ...
  settings["--save"] = args.save_dir;
  settings["--save-interval"] = args.save_interval;
  settings["--keep-last"] = args.keep_last;
  settings["--overwrite"] = args.overwrite;
  settings["--load"] = args.load_dir;
  settings["--load-step"] = args.load_step;
  settings["--comm-timeout"] = args.comm_timeout;
  return settings;
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
      app.add_option("--config", args->config, "Training config (YAML)")
          ->required()
          ->check(non_empty_path());
      app.add_option("overrides", args->overrides, "Overrides: section.key=value ...");
      app.add_option("--log-jsonl", args->log_jsonl, "Write one JSON object per step/eval")
          ->check(non_empty_path());
      app.add_option("--plot", args->plot, "Write the loss curve(s) as SVG")
          ->check(non_empty_path());
      auto* save = app.add_option("--save", args->save_dir,
                                  "Save checkpoints under DIR (DIR/step-NNNNNNN, DIR/latest); "
                                  "always after the last step")
                       ->check(non_empty_path());
      app.add_option("--save-interval", args->save_interval, "Also save every N steps")
          ->needs(save)
          ->check(integer_in(1, kMaxStep));
      app.add_flag("--overwrite", args->overwrite,
                   "With --save DIR: save there although DIR holds checkpoints this run does "
                   "not resume from (they may be replaced or pruned)")
          ->needs(save);
      app.add_option("--keep-last", args->keep_last,
                     "Keep only the newest K checkpoints under --save DIR")
          ->needs(save)
          ->check(integer_in(1, 1 << 20));
      auto* load = app.add_option("--load", args->load_dir,
                                  "Resume from a checkpoint: DIR (its latest), or a step "
                                  "directory")
                       ->check(non_empty_path());
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
        const NewDirectories new_save_dirs(args->save_dir);
        if (!check_once_per_job([&] { check_train_paths(*args, *config); })) {
          new_save_dirs.remove_while_empty();
          return 2;
        }
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
          try {
            const ProcessGroupPtr world = init_mpi_world(ProcessGroupOptions{args->comm_timeout});
            check_settings_agree(*world, job_settings(*args, *config));
            const std::vector<CommandPath> logs{
                flag_or_config_output("--log-jsonl", args->log_jsonl, "logging.jsonl_path",
                                      config->logging.jsonl_path),
                flag_or_config_output("--plot", args->plot, "logging.plot_path",
                                      config->logging.plot_path)};
            check_rank0_outputs_clear_of_configs(*world, args->config, logs);
            warn_of_outputs_only_rank0_writes(*world, logs);
            run_training(*config, world, options);
          } catch (...) {  // before run_rank_main reports it (and, at several ranks, aborts)
            new_save_dirs.remove_while_empty();
            throw;
          }
          return 0;
        });
      };
    });

}  // namespace
}  // namespace shardwise::cli
