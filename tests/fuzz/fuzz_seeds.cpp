// Writes the seed corpora of the fuzz harnesses into DIR/<harness>/ from the library's own
// writers, so that no corpus is stored in the tree: safetensors headers from SafetensorsWriter,
// model specs from model_spec_to_json, a training config from to_yaml (scripts/fuzz.sh adds the
// example configs) plus configs with anchors, aliases and several documents, and checkpoint
// manifests as save_checkpoint writes them.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "shardwise/checkpoint/safetensors.hpp"
#include "shardwise/config/training_config.hpp"
#include "shardwise/layout/model_spec.hpp"
#include "shardwise/layout/model_zoo.hpp"

namespace {

namespace fs = std::filesystem;
using namespace shardwise;

void write_seed(const fs::path& dir, const std::string& name, const std::string& bytes) {
  fs::create_directories(dir);
  std::ofstream(dir / name, std::ios::binary) << bytes;
}

// The harness input: 2 bytes of data-area size, then the header.
std::string safetensors_seed(const SafetensorsWriter& writer) {
  const std::string header = writer.header();
  const std::uint64_t data_bytes = writer.file_bytes() - 8 - header.size();
  std::string seed(2, '\0');
  seed[0] = static_cast<char>(data_bytes & 0xff);
  seed[1] = static_cast<char>((data_bytes >> 8) & 0xff);
  return seed + header;
}

void safetensors_seeds(const fs::path& dir) {
  static const std::vector<std::uint8_t> bytes(4096, 0);
  SafetensorsWriter empty;
  write_seed(dir, "empty", safetensors_seed(empty));
  SafetensorsWriter model;
  model.set_metadata("format", "pt");
  model.add("embedding.word_embeddings.weight", DType::kBFloat16, {16, 8}, bytes.data());
  model.add("layers.0.mlp.fc1.weight", DType::kFloat32, {8, 8}, bytes.data());
  model.add("layers.0.norm.weight", DType::kFloat16, {8}, bytes.data());
  model.add("step", DType::kInt64, {}, bytes.data());
  model.add("empty", DType::kUInt8, {0, 3}, bytes.data());
  write_seed(dir, "model", safetensors_seed(model));
  SafetensorsWriter mxfp8;
  mxfp8.set_metadata("shardwise.mxfp8.tensors", "w");
  mxfp8.set_metadata("shardwise.mxfp8.tensor.w", R"({"dtype":"BF16","shape":[4,64]})");
  mxfp8.add("w", DType::kFloat8E4M3, {4, 64}, bytes.data());
  mxfp8.add("w_scale", DType::kFloat8E8M0, {4, 2}, bytes.data());
  write_seed(dir, "mxfp8", safetensors_seed(mxfp8));
}

void model_spec_seeds(const fs::path& dir) {
  TransformerConfig tiny;
  tiny.name = "tiny";
  tiny.num_layers = 2;
  tiny.hidden_size = 64;
  tiny.ffn_hidden_size = 128;
  tiny.num_attention_heads = 4;
  tiny.vocab_size = 100;
  write_seed(dir, "tiny", model_spec_to_json(generate_model_spec(tiny)));
  tiny.add_bias = true;
  tiny.layernorm_bias = true;
  tiny.gated_mlp = false;
  tiny.max_position_embeddings = 32;
  write_seed(dir, "tiny_gpt", model_spec_to_json(generate_model_spec(tiny)));
  tiny.num_experts = 4;
  tiny.moe_ffn_hidden_size = 32;
  tiny.num_dense_layers = 1;
  write_seed(dir, "tiny_moe", model_spec_to_json(generate_model_spec(tiny)));
}

// Configs that exercise anchors and aliases (shared, nested, recursive), merge-like reuse,
// second documents and quoted or YAML 1.1 booleans: the mutations start from these shapes.
void training_config_seeds(const fs::path& dir) {
  write_seed(dir, "defaults", to_yaml(TrainingConfig{}));
  write_seed(dir, "anchors",
             "sizes: &s {layers: 2, hidden: 32}\nmodel: *s\ntraining: &t {steps: 3}\n");
  write_seed(dir, "alias_list",
             "ddp:\n  layer_wise_cuts: &c [1, 2]\nparallel: {tp: 1}\nx: [*c, *c, [*c]]\n");
  write_seed(dir, "self_alias", "model:\n  arch: &a [*a]\n");
  write_seed(dir, "map_cycle", "model: &m\n  layers: 2\n  loop: *m\n");
  write_seed(dir, "two_documents", "training:\n  steps: 5\n---\ntraining:\n  steps: 7\n");
  write_seed(dir, "booleans",
             "ddp: {overlap_grad_reduce: yes, overlap_param_gather: 'true'}\n"
             "parallel: {sequence_parallel: True}\n");
  write_seed(dir, "sizes",
             "parallel: {pp: 65536, vp: 65536}\ntraining: {grad_accumulation: "
             "2147483647}\n");
}

// A manifest as build_manifest writes one (step 3 of a 2-rank run), and variants around the
// checked fields.
void checkpoint_manifest_seeds(const fs::path& dir) {
  const std::string files =
      R"(["optimizer-rank-00000-of-00002.safetensors", "optimizer-rank-00001-of-00002.safetensors"])";
  const std::string manifest =
      R"({"format": "shardwise.checkpoint", "format_version": 1, "step": 3, )"
      R"("trainer": {"next_step": 3, "consumed_samples": 24}, "data_parallel_size": 2, )"
      R"("optimizer_kind": "layer-wise", "optimizer_state_replicated": false, )"
      R"("layer_wise_replicas": 1, "model": {"file": "model.safetensors", "params": )"
      R"([{"name": "w", "shape": [4, 4], "dtype": "fp32"}]}, "optimizer_files": )" +
      files +
      R"(, "index": {"w": [{"file": "optimizer-rank-00000-of-00002.safetensors", "rank": 0, )"
      R"("start": 0, "end": 8, "fields": ["exp_avg"]}]}, "global_batch": 8, )"
      R"("batch_history": [[0, 8]]})";
  write_seed(dir, "manifest", manifest);
  write_seed(dir, "minimal",
             R"({"format": "shardwise.checkpoint", "format_version": 1, "step": 3, "trainer": )"
             R"({"consumed_samples": 0}, "data_parallel_size": 1, "optimizer_kind": "ddp", )"
             R"("optimizer_files": ["optimizer-rank-00000-of-00001.safetensors"], "model": {}})");
  write_seed(dir, "big_numbers",
             R"({"format": "shardwise.checkpoint", "format_version": 1, "step": 3, "trainer": )"
             R"({"consumed_samples": 18446744073709551615}, "data_parallel_size": 2147483648, )"
             R"("optimizer_kind": "ddp", "optimizer_files": [], "model": {}})");
  // A step beyond int64 as a float: converted before its range check (UB; found in CI).
  write_seed(dir, "float_step",
             R"({"format": "shardwise.checkpoint", "format_version": 1, "step": 3.5e123, )"
             R"("trainer": {"consumed_samples": 0}, "data_parallel_size": 1, "optimizer_kind": )"
             R"("ddp", "optimizer_files": ["optimizer-rank-00000-of-00001.safetensors"], )"
             R"("model": {}})");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  const fs::path root = argv[1];
  safetensors_seeds(root / "fuzz_safetensors_header");
  model_spec_seeds(root / "fuzz_model_spec");
  training_config_seeds(root / "fuzz_training_config");
  checkpoint_manifest_seeds(root / "fuzz_checkpoint_manifest");
  return 0;
}
