// `shardwise generate --checkpoint DIR --prompt TEXT [--tokens N --temperature T --top-k K
// --seed S]`: samples text from a byte-level model trained by `shardwise train --save DIR`, to see
// what it learnt. DIR is a checkpoint root (its latest step; --step S for another) or a step
// directory. Prints the prompt followed by the sampled bytes. One process, no MPI; with --tp N
// (under `mpirun -np N`) the model runs tensor-parallel over the N ranks, each holding its shard of
// the checkpoint's full tensors, and rank 0 prints. A job of N > 1 ranks needs --tp N on each.
#include <cstdio>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli_integer.hpp"
#include "cli_path.hpp"
#include "comm_timeout_option.hpp"
#include "command_registry.hpp"
#include "launch_env.hpp"
#include "shardwise/comm/mpi_process_group.hpp"
#include "shardwise/comm/rank_flags.hpp"
#include "shardwise/comm/settings_agreement.hpp"
#include "shardwise/core/checked_size.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/train/checkpoint_gpt.hpp"
#include "shardwise/train/text_generation.hpp"

namespace shardwise::cli {
namespace {

struct GenerateArgs {
  std::string checkpoint;
  std::int64_t step = -1;
  std::string prompt;
  int tokens = 200;
  SamplingOptions sampling;
  int tp = 1;
  double comm_timeout = kDefaultCommTimeoutSeconds;
};

// The checkpoint's model as TP shards over `group` (its own storage, shards of the full values).
struct ShardedGpt {
  std::vector<std::vector<float>> values, grads;
  std::unique_ptr<GptModel<float>> model;
  ShardedGpt(const CheckpointGpt& full, ProcessGroup& group) {
    full.config.validate_tensor_parallel(group.size(), "--tp");  // named as the user gave it
    TensorParallelOptions tp;
    tp.group = &group;
    model = std::make_unique<GptModel<float>>(full.config, tp);
    std::vector<float*> v, g;
    for (std::size_t i = 0; i < model->params().size(); ++i) {
      const ParamInfo& shard = model->params()[i];
      values.emplace_back(static_cast<std::size_t>(shard.numel()));
      grads.emplace_back(static_cast<std::size_t>(shard.numel()), 0.0f);
      slice_tp_shard(full.model->params()[i], shard, tp.size(), tp.rank(), full.values[i].data(),
                     values.back().data());
      v.push_back(values.back().data());
      g.push_back(grads.back().data());
    }
    model->bind(std::move(v), std::move(g));
  }
};

// Each byte of the prompt is one token; the model must know every one of them.
std::vector<std::int32_t> prompt_tokens(const std::string& prompt, int vocab) {
  SW_REQUIRE(!prompt.empty(), InvalidArgument, "--prompt: empty (give at least one character)");
  std::vector<std::int32_t> tokens;
  for (std::size_t i = 0; i < prompt.size(); ++i) {
    const int byte = static_cast<unsigned char>(prompt[i]);
    SW_REQUIRE(byte < vocab, InvalidArgument, "--prompt: byte ", byte, " at position ", i,
               " is outside the model's vocabulary of ", vocab, " (bytes 0..", vocab - 1, ")");
    tokens.push_back(byte);
  }
  return tokens;
}

// A job of several ranks (--tp N, or any launch of more than one process): MPI up, then every
// rank's arguments agree and the job has --tp ranks. A rank without --tp among ranks with it
// sampled alone and left the others to Open MPI's "exited improperly".
ProcessGroupPtr start_generate_job(const GenerateArgs& args) {
  const ProcessGroupPtr world = init_mpi_world(ProcessGroupOptions{args.comm_timeout});
  // Ranks that sample differently, or from another prompt, crash (MPI_ERR_TRUNCATE) or print
  // rank 0's text as if all agreed.
  check_settings_agree(*world, {{"subcommand", "generate"},
                                {"--tp", args.tp},
                                {"--checkpoint", args.checkpoint},
                                {"--step", args.step},
                                {"--prompt", args.prompt},
                                {"--tokens", args.tokens},
                                {"--temperature", args.sampling.temperature},
                                {"--top-k", args.sampling.top_k},
                                {"--seed", args.sampling.seed},
                                {"--comm-timeout", args.comm_timeout}});
  SW_REQUIRE(world->size() == args.tp, InvalidArgument, "--tp ", args.tp, ": this job has ",
             world->size(), " ranks; run generate under mpirun -np ", args.tp,
             args.tp == 1 ? " (one process), or give --tp " : "",
             args.tp == 1 ? std::to_string(world->size()) : "");
  return world;
}

// The checkpoint, read by every rank of `world` (when there is one): a rank that cannot read it
// fails with its own error and the others name it (none waits in the next collective).
CheckpointGpt load_on_every_rank(const GenerateArgs& args, ProcessGroup* world) {
  std::optional<std::int64_t> step;
  if (args.step >= 0) step = args.step;
  if (world == nullptr) return load_gpt_checkpoint(args.checkpoint, step);
  std::optional<CheckpointGpt> loaded;
  const std::vector<int> failed =
      run_on_every_rank(*world, [&] { loaded = load_gpt_checkpoint(args.checkpoint, step); });
  SW_REQUIRE(failed.empty(), FormatError, "checkpoint '", args.checkpoint,
             "' could not be read on rank(s) ", rank_list(failed), " (see their errors)");
  return std::move(*loaded);
}

int run_generate(const GenerateArgs& args, bool several_ranks) {
  TokenSampler{args.sampling};  // bad --temperature / --top-k fail before any file is read
  const ProcessGroupPtr world = several_ranks ? start_generate_job(args) : nullptr;
  CheckpointGpt loaded = load_on_every_rank(args, world.get());
  const int vocab = loaded.config.vocab_size;
  SW_REQUIRE(vocab <= 256, InvalidArgument, "checkpoint '", loaded.directory.string(),
             "': vocabulary of ", vocab,
             " tokens is not byte-level; generate reads and "
             "writes text as bytes (train on text or byte-level .bin data)");
  const std::vector<std::int32_t> prompt = prompt_tokens(args.prompt, vocab);
  std::vector<std::int32_t> generated;
  if (world) {
    // The same path may hold another run's checkpoint on another node: the ranks would shard
    // two models into one and sample from the mix.
    require_same_gpt_checkpoint_on_every_rank(*world, loaded);
    // Every rank samples with the same seed from the same (gathered) distribution.
    ShardedGpt sharded(loaded, *world);
    generated = generate_tokens(*sharded.model, prompt, args.tokens, args.sampling);
    if (world->rank() != 0) return 0;
  } else {
    generated = generate_tokens(*loaded.model, prompt, args.tokens, args.sampling);
  }
  std::string text = args.prompt;
  for (std::int32_t t : generated) text.push_back(static_cast<char>(t));
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fputc('\n', stdout);
  return 0;
}

const bool registered = register_command(
    "generate", "Sample text from a trained byte-level model (a `train --save` checkpoint)",
    [](CLI::App& app) {
      auto args = std::make_shared<GenerateArgs>();
      app.add_option("--checkpoint", args->checkpoint,
                     "Checkpoint root (latest step) or step directory")
          ->required()
          ->check(non_empty_path());
      app.add_option("--step", args->step, "With a checkpoint root: use step S")
          ->check(integer_in(0, kMaxStep));
      app.add_option("--prompt", args->prompt, "Text to continue (one token per byte)")->required();
      app.add_option("--tokens", args->tokens, "Bytes to generate (default 200)")
          ->check(integer_in(0, 1 << 20));
      app.add_option("--temperature", args->sampling.temperature,
                     "Sampling temperature; 0 = greedy (default 0.8)");
      app.add_option("--top-k", args->sampling.top_k,
                     "Sample among the K most likely bytes only; 0 = all (default)")
          ->check(integer_in(0, kMaxModelDimension));
      app.add_option("--seed", args->sampling.seed, "Random seed (default 0)")
          ->check(unsigned_integer());
      app.add_option("--tp", args->tp,
                     "Run the model tensor-parallel over N ranks (under mpirun -np N; default 1)")
          ->check(integer_in(1, kMaxParallelSize));
      add_comm_timeout_option(app, args->comm_timeout);
      return [args] {
        validate_comm_timeout(args->comm_timeout, "--comm-timeout");
        const std::optional<LaunchEnv> env = launch_env();
        const bool several_ranks = args->tp > 1 || (env && env->size > 1);
        if (!several_ranks) return run_generate(*args, false);
        return run_rank_main([&] { return run_generate(*args, true); });
      };
    });

}  // namespace
}  // namespace shardwise::cli
