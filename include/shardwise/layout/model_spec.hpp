// Model specs: a model's parameters (ParamInfo list, forward order) as a JSON file, so the layout
// tools and benchmarks can work on real architectures without building the model.
//
//   {"name": "llama3-8b",
//    "params": [{"name": "embedding.word_embeddings.weight", "shape": [128256, 4096],
//                "dtype": "bf16", "embedding_or_output": true}, ...]}
//
// Per param only "name" and "shape" are required; optional fields: "dtype" (default bf16),
// "grad_dtype", "shared_embedding", "expert_parallel", "embedding_or_output", "use_muon" (bool or
// null), "qkv_split" ([q, k, v] row counts of a fused 2-D QKV weight). Unknown fields, bad shapes,
// bad dtypes and duplicate names are errors naming the source, the param and the field.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "shardwise/layout/param_info.hpp"

namespace shardwise {

struct ModelSpec {
  std::string name;
  ParamList params;  // forward order

  std::int64_t total_numel() const;
};

// Parses spec JSON text; source_name (usually the file path) prefixes every error message.
// Throws FormatError for malformed JSON or a malformed spec.
ModelSpec parse_model_spec(std::string_view json_text, std::string_view source_name);

// Reads and parses a spec file. Throws IoError when the file cannot be read.
ModelSpec load_model_spec(const std::filesystem::path& path);

// Serialises a spec: one param per line, optional fields written only when they differ from the
// defaults. parse_model_spec(model_spec_to_json(s)) reproduces s.
std::string model_spec_to_json(const ModelSpec& spec);

// Writes model_spec_to_json(spec) atomically (temp file in the same directory + rename).
void save_model_spec(const ModelSpec& spec, const std::filesystem::path& path);

// Writes text to path atomically: a temp file next to it, then rename over it. Throws IoError.
void write_file_atomically(const std::filesystem::path& path, std::string_view text);

}  // namespace shardwise
