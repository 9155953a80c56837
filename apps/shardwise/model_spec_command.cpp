// `shardwise model-spec`: writes a model spec JSON (params in forward order) for a bundled preset,
// optionally with hyperparameters overridden, to --out FILE (atomically) or stdout.
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "cli_bool.hpp"
#include "cli_integer.hpp"
#include "cli_path.hpp"
#include "command_registry.hpp"
#include "shardwise/core/checked_size.hpp"
#include "shardwise/core/command_paths.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/core/message_text.hpp"
#include "shardwise/layout/model_zoo.hpp"
#include "shardwise/layout/param_dtype.hpp"

namespace shardwise::cli {
namespace {

struct ModelSpecArgs {
  std::string arch;
  bool list = false;
  std::string out;
  std::string name;
  std::optional<int> layers;
  std::optional<std::int64_t> hidden;
  std::optional<std::int64_t> ffn;
  std::optional<int> heads;
  std::optional<int> kv_heads;
  std::optional<std::int64_t> head_dim;
  std::optional<std::int64_t> vocab;
  std::optional<std::int64_t> max_positions;
  std::optional<int> experts;
  std::optional<std::int64_t> moe_ffn;
  std::optional<int> shared_experts;
  std::optional<int> dense_layers;
  std::string tied_embeddings;
  std::string gated_mlp;
  std::string bias;
  std::string dtype;
};

template <typename T, typename U>
void override_if_set(const std::optional<T>& value, U& field) {
  if (value) field = *value;
}

int run_model_spec(const ModelSpecArgs& args) {
  if (args.list) {
    for (const auto& name : bundled_model_names()) {
      const ModelSpec spec = bundled_model_spec(name);
      std::printf("%-14s %8zu params %18lld elements\n", name.c_str(), spec.params.size(),
                  static_cast<long long>(spec.total_numel()));
    }
    return 0;
  }
  SW_REQUIRE(!args.arch.empty(), InvalidArgument,
             "model-spec: --arch is required (or --list to see the presets)");
  const bool to_stdout = args.out.empty() || args.out == "-";
  if (!to_stdout) check_command_paths({{"--out", args.out, PathUse::kWriteFile}});
  TransformerConfig config = bundled_model_config(args.arch);
  SW_REQUIRE(first_invalid_utf8(args.name) == args.name.size(), InvalidArgument,
             "model-spec: --name '", printable(args.name, 256),
             "' is not valid UTF-8: the spec is JSON text, which must be UTF-8");
  if (!args.name.empty()) config.name = args.name;
  override_if_set(args.layers, config.num_layers);
  override_if_set(args.hidden, config.hidden_size);
  override_if_set(args.ffn, config.ffn_hidden_size);
  override_if_set(args.heads, config.num_attention_heads);
  override_if_set(args.kv_heads, config.num_query_groups);
  override_if_set(args.head_dim, config.head_dim);
  override_if_set(args.vocab, config.vocab_size);
  override_if_set(args.max_positions, config.max_position_embeddings);
  override_if_set(args.experts, config.num_experts);
  override_if_set(args.moe_ffn, config.moe_ffn_hidden_size);
  override_if_set(args.shared_experts, config.num_shared_experts);
  override_if_set(args.dense_layers, config.num_dense_layers);
  if (!args.tied_embeddings.empty()) {
    config.tied_embeddings = parse_bool_option(args.tied_embeddings, "--tied-embeddings");
  }
  if (!args.gated_mlp.empty()) config.gated_mlp = parse_bool_option(args.gated_mlp, "--gated-mlp");
  if (!args.bias.empty()) config.add_bias = parse_bool_option(args.bias, "--bias");
  if (!args.dtype.empty()) {
    // An unknown name is told the parameter dtypes, not every dtype a file may hold.
    const std::optional<DType> dtype = parse_dtype(args.dtype);
    SW_REQUIRE(dtype, InvalidArgument, "--dtype: unknown dtype '", printable(args.dtype),
               "' (valid: ", kParamDtypeNames, ")");
    config.dtype = *dtype;
  }

  // Expert options on a dense model would be dropped from the spec without a word.
  SW_REQUIRE(config.num_experts > 0 || (!args.moe_ffn && !args.shared_experts), InvalidArgument,
             args.moe_ffn ? "--moe-ffn" : "--shared-experts",
             ": applies to MoE models only, and this one has no experts (give --experts N)");
  const ModelSpec spec = generate_model_spec(config);
  if (to_stdout) {
    const std::string text = model_spec_to_json(spec);
    std::fwrite(text.data(), 1, text.size(), stdout);
  } else {
    save_model_spec(spec, args.out);
    std::fprintf(stderr, "wrote %s: %zu params, %lld elements\n", args.out.c_str(),
                 spec.params.size(), static_cast<long long>(spec.total_numel()));
  }
  return 0;
}

const bool registered = register_command(
    "model-spec", "Write a model spec JSON for a GPT-style dense or MoE architecture",
    [](CLI::App& app) {
      auto args = std::make_shared<ModelSpecArgs>();
      app.add_option("--arch", args->arch,
                     "Preset: gpt-tiny, moe-tiny, gpt3-175b, llama3-8b, llama3-70b, llama3-405b, "
                     "mixtral-8x7b, deepseek-v3 (hyperparameter options override it)");
      CLI::Option* list = app.add_flag("--list", args->list, "List the presets with their sizes");
      app.add_option("--out,-o", args->out, "Output file (default: stdout); written atomically")
          ->check(non_empty_path());
      app.add_option("--name", args->name, "Model name stored in the spec")
          ->check(non_empty_value());
      // Limits no real model reaches (core/checked_size.hpp); 2e9 layers would run for ever.
      const CLI::Validator dimension = integer_in(1, kMaxModelDimension);
      const CLI::Validator optional_dimension = integer_in(0, kMaxModelDimension);
      app.add_option("--layers", args->layers, "Number of transformer layers")
          ->check(integer_in(1, kMaxLayers));
      app.add_option("--hidden", args->hidden, "Hidden size")->check(dimension);
      app.add_option("--ffn", args->ffn, "Dense MLP hidden size")->check(dimension);
      app.add_option("--heads", args->heads, "Attention heads")->check(dimension);
      app.add_option("--kv-heads", args->kv_heads, "Key/value heads (query groups)")
          ->check(optional_dimension);
      app.add_option("--head-dim", args->head_dim, "Head dimension (default hidden/heads)")
          ->check(optional_dimension);
      app.add_option("--vocab", args->vocab, "Vocabulary size")->check(dimension);
      app.add_option("--max-positions", args->max_positions,
                     "Learned position embeddings (0 = none, e.g. RoPE)")
          ->check(optional_dimension);
      app.add_option("--experts", args->experts, "Routed experts per MoE layer (0 = dense)")
          ->check(integer_in(0, kMaxExperts));
      app.add_option("--moe-ffn", args->moe_ffn, "Expert MLP hidden size")->check(dimension);
      app.add_option("--shared-experts", args->shared_experts, "Shared experts per MoE layer")
          ->check(integer_in(0, kMaxExperts));
      app.add_option("--dense-layers", args->dense_layers, "Leading layers with a dense MLP")
          ->check(integer_in(0, kMaxLayers));
      app.add_option("--tied-embeddings", args->tied_embeddings, "true|false")
          ->check(non_empty_value());
      app.add_option("--gated-mlp", args->gated_mlp, "true|false (SwiGLU: fc1 has 2*ffn rows)")
          ->check(non_empty_value());
      app.add_option("--bias", args->bias, "true|false (biases on linear layers)")
          ->check(non_empty_value());
      app.add_option("--dtype", args->dtype, "Parameter dtype (default bf16)")
          ->check(non_empty_value());
      // --list prints the presets and nothing else: --arch or --out beside it were ignored.
      for (CLI::Option* option : app.get_options()) {
        if (option != list && option != app.get_help_ptr()) list->excludes(option);
      }
      return [args] { return run_model_spec(*args); };
    });

}  // namespace
}  // namespace shardwise::cli
