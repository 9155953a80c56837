// `shardwise train --config FILE.yaml [section.key=value ...]`: the main job. Launch with
// `mpirun -np N shardwise train ...` (or srun); without a launcher it runs as dp=1.
#include <memory>
#include <string>
#include <vector>

#include "command_registry.hpp"
#include "shardwise/comm/mpi_process_group.hpp"
#include "shardwise/config/training_config.hpp"
#include "shardwise/train/trainer.hpp"

namespace shardwise::cli {
namespace {

struct TrainArgs {
  std::string config;
  std::vector<std::string> overrides;
  std::string log_jsonl;
  std::string plot;
};

const bool registered = register_command(
    "train", "Train the reference GPT data-parallel (run under mpirun for several ranks)",
    [](CLI::App& app) {
      auto args = std::make_shared<TrainArgs>();
      app.add_option("--config", args->config, "Training config (YAML)")->required();
      app.add_option("overrides", args->overrides, "Overrides: section.key=value ...");
      app.add_option("--log-jsonl", args->log_jsonl, "Write one JSON object per step/eval");
      app.add_option("--plot", args->plot, "Write the loss curve(s) as SVG");
      return [args] {
        // Parse before touching MPI so a bad config fails fast with exit 2 on every rank.
        const TrainingConfig config = load_training_config(args->config, args->overrides);
        return run_rank_main([&] {
          TrainerOptions options;
          options.log_jsonl = args->log_jsonl;
          options.plot = args->plot;
          run_training(config, init_mpi_world(), options);
          return 0;
        });
      };
    });

}  // namespace
}  // namespace shardwise::cli
