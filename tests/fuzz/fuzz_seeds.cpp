// Writes the seed corpora of the fuzz harnesses into DIR/<harness>/ from the library's own
// writers, so that no corpus is stored in the tree: safetensors headers from SafetensorsWriter,
// model specs from model_spec_to_json, a training config from to_yaml (scripts/fuzz.sh adds the
// example configs).
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

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  const fs::path root = argv[1];
  safetensors_seeds(root / "fuzz_safetensors_header");
  model_spec_seeds(root / "fuzz_model_spec");
  write_seed(root / "fuzz_training_config", "defaults", to_yaml(TrainingConfig{}));
  return 0;
}
