#include "shardwise/train/checkpoint_gpt.hpp"

#include <initializer_list>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "shardwise/checkpoint/checkpoint.hpp"
#include "shardwise/checkpoint/safetensors.hpp"
#include "shardwise/core/checked_size.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/core/finite_values.hpp"
#include "shardwise/core/json_text.hpp"
#include "shardwise/core/message_text.hpp"

namespace shardwise {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const json& model_section(const json& manifest, const fs::path& dir) {
  const json* model = saved_model_config(manifest);
  SW_REQUIRE(model != nullptr, FormatError, "checkpoint manifest '",
             (dir / kCheckpointManifestFile).string(),
             "' has no \"config\".\"model\" section (not written by `shardwise train`?)");
  return *model;
}

template <typename T>
T model_field(const json& model, const char* key, const fs::path& dir) {
  try {
    return model.at(key).get<T>();
  } catch (const json::exception&) {
    throw FormatError(str_cat("checkpoint manifest '", (dir / kCheckpointManifestFile).string(),
                              "': config.model.", key, " is missing or of the wrong type"));
  }
}

// A size, read strictly: get<int>() took 4294967300 heads as 4 and 4.5 as 4.
int model_size(const json& model, const char* key, const fs::path& dir) {
  const json& value = model_field<json>(model, key, dir);
  const std::optional<std::int64_t> size = json_integer_within(value, 1, kMaxModelDimension);
  SW_REQUIRE(size.has_value(), FormatError, "checkpoint manifest '",
             (dir / kCheckpointManifestFile).string(), "': config.model.", key, " is ",
             json_excerpt(value), "; expected an integer in [1, ", kMaxModelDimension, "]");
  return static_cast<int>(*size);
}

// A text field that must be one of `valid`: "position": "banana" read as learned positions.
std::string model_choice(const json& model, const char* key,
                         std::initializer_list<const char*> valid, const fs::path& dir) {
  const auto text = model_field<std::string>(model, key, dir);
  std::string names;
  for (const char* name : valid) {
    if (text == name) return text;
    names += names.empty() ? name : str_cat(", ", name);
  }
  throw FormatError(str_cat("checkpoint manifest '", (dir / kCheckpointManifestFile).string(),
                            "': config.model.", key, " is '", printable(text), "' (valid: ", names,
                            ")"));
}

// Sizes the weights determine (vocabulary, learned context length) come from the weights;
// the rest from the config the run was trained with.
GptConfig config_from(const json& model, const SafetensorsFile& weights, const fs::path& dir) {
  GptConfig g;
  model_choice(model, "arch", {"gpt"}, dir);  // the only architecture `train` writes
  g.num_layers = model_size(model, "layers", dir);
  g.hidden = model_size(model, "hidden", dir);
  g.num_heads = model_size(model, "heads", dir);
  g.ffn_hidden = model_size(model, "ffn", dir);
  g.rope = model_choice(model, "position", {"learned", "rope"}, dir) == "rope";
  g.tied_embeddings = model_field<bool>(model, "tied_embeddings", dir);
  const auto& embedding = weights.info("embedding.word_embeddings.weight");
  SW_REQUIRE(embedding.shape.size() == 2, ShapeError, "'", weights.path().string(),
             "': embedding.word_embeddings.weight is not a matrix");
  g.vocab_size = static_cast<int>(embedding.shape[0]);
  g.seq_len = g.rope
                  ? model_size(model, "seq_len", dir)
                  : static_cast<int>(weights.info("embedding.position_embeddings.weight").shape[0]);
  try {
    g.validate();
  } catch (const Error& e) {  // the values came from the checkpoint, not the user's config
    throw FormatError(str_cat("checkpoint manifest '", (dir / kCheckpointManifestFile).string(),
                              "': config.", e.what()));
  }
  return g;
}

}  // namespace

CheckpointGpt load_gpt_checkpoint(const fs::path& path, std::optional<std::int64_t> step) {
  CheckpointGpt out;
  out.directory = resolve_checkpoint_directory(path, step);
  out.manifest = read_checkpoint_manifest(out.directory);
  const json& manifest = out.manifest;
  out.step = manifest.at("step").get<std::int64_t>();
  const SafetensorsFile weights = SafetensorsFile::open(out.directory / kCheckpointModelFile);
  out.config = config_from(model_section(manifest, out.directory), weights, out.directory);
  out.model = std::make_unique<GptModel<float>>(out.config);
  std::vector<float*> values, grads;
  for (const ParamInfo& p : out.model->params()) {
    const SafetensorsTensorInfo& info = weights.info(p.name);
    SW_REQUIRE(info.dtype == DType::kFloat32 && info.shape == p.shape, ShapeError, "'",
               weights.path().string(), "': tensor '", p.name, "' is ", dtype_name(info.dtype), " ",
               shape_text(info.shape), ", but the checkpoint's config gives fp32 ",
               shape_text(p.shape));
    auto& v = out.values.emplace_back(static_cast<std::size_t>(p.numel()));
    weights.read_range(p.name, 0, p.numel(), v.data());
    require_finite_tensor(v.data(), p.numel(), weights.path(), p.name);
    values.push_back(v.data());
    grads.push_back(out.grads.emplace_back(static_cast<std::size_t>(p.numel())).data());
  }
  // A tensor the model has no place for means the config and the weights disagree: a learned
  // position table under "position": "rope" would otherwise go unused without a word.
  std::set<std::string> names;
  for (const ParamInfo& p : out.model->params()) names.insert(p.name);
  for (const SafetensorsTensorInfo& info : weights.tensors()) {
    SW_REQUIRE(names.count(info.name) != 0, FormatError, "'", weights.path().string(),
               "' has tensor '", printable(info.name),
               "', which the model its manifest's config describes does not have");
  }
  out.model->bind(std::move(values), std::move(grads));
  return out;
}

std::vector<ModelTensor> fp32_model_tensors(const ParamList& params,
                                            std::vector<std::vector<float>>& values) {
  std::vector<ModelTensor> out;
  for (std::size_t i = 0; i < params.size(); ++i) {
    out.push_back({params[i].name, params[i].shape,
                   TensorView{values[i].data(), params[i].numel(), DType::kFloat32}});
  }
  return out;
}

void require_same_gpt_checkpoint_on_every_rank(ProcessGroup& group, const CheckpointGpt& loaded) {
  // Only read: the views are non-const because ModelTensor also serves loads.
  auto& values = const_cast<std::vector<std::vector<float>>&>(loaded.values);
  require_same_checkpoint_on_every_rank(group, loaded.directory, loaded.manifest,
                                        fp32_model_tensors(loaded.model->params(), values));
}

}  // namespace shardwise
