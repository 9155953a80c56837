#include <string>

#include "shardwise/core/error.hpp"
#include "shardwise/model/gpt_model.hpp"
#include "shardwise/model/gpt_param_ids.hpp"

namespace shardwise {

namespace {

// Adds parameters in forward order; `split` marks how each is divided across the TP ranks.
class ParamListBuilder {
 public:
  explicit ParamListBuilder(int tp) : tp_(tp) {}

  ParamInfo& replicated(std::string name, std::vector<std::int64_t> shape) {
    ParamInfo& p = add(std::move(name), std::move(shape));
    p.tp_duplicate = tp_ > 1;
    p.tp_split = ParamInfo::TpSplitDeclaration{};
    return p;
  }
  // Split along `dim` (its extent divided by the TP size); stride > 1: `stride` equal parts.
  ParamInfo& split(std::string name, std::vector<std::int64_t> shape, int dim, int stride = 1) {
    shape[dim] /= tp_;
    ParamInfo& p = add(std::move(name), std::move(shape));
    p.tp_split = ParamInfo::TpSplitDeclaration{dim, stride};
    if (tp_ > 1) {
      p.tp_partition_dim = dim;
      p.tp_stride = stride;
    }
    return p;
  }
  ParamList take() { return std::move(params_); }

 private:
  ParamInfo& add(std::string name, std::vector<std::int64_t> shape) {
    ParamInfo p;
    p.name = std::move(name);
    p.shape = std::move(shape);
    p.dtype = DType::kFloat32;  // the CPU model computes and stores fp32
    params_.push_back(std::move(p));
    return params_.back();
  }
  int tp_;
  ParamList params_;
};

}  // namespace

ParamList gpt_param_list(const GptConfig& config, int tp_size) {
  config.validate_tensor_parallel(tp_size);
  const std::int64_t v = config.padded_vocab_size(tp_size), h = config.hidden,
                     f = config.ffn_hidden;
  ParamListBuilder b(tp_size);
  ParamInfo& wte = b.split("embedding.word_embeddings.weight", {v, h}, 0);
  wte.embedding_or_output = true;
  wte.shared_embedding = config.tied_embeddings;
  if (!config.rope) {
    ParamInfo& wpe = b.replicated("embedding.position_embeddings.weight", {config.seq_len, h});
    wpe.embedding_or_output = true;
    wpe.use_muon = false;
  }
  for (int l = 0; l < config.num_layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    b.replicated(p + "input_layernorm.weight", {h});
    b.replicated(p + "input_layernorm.bias", {h});
    // Fused [q | k | v] rows: each rank holds its heads' rows of each part.
    const std::int64_t part = h / tp_size;
    b.split(p + "attention.qkv.weight", {3 * h, h}, 0, 3).qkv_split = {part, part, part};
    b.split(p + "attention.qkv.bias", {3 * h}, 0, 3);
    b.split(p + "attention.proj.weight", {h, h}, 1);
    b.replicated(p + "attention.proj.bias", {h});
    b.replicated(p + "post_attention_layernorm.weight", {h});
    b.replicated(p + "post_attention_layernorm.bias", {h});
    b.split(p + "mlp.fc1.weight", {f, h}, 0);
    b.split(p + "mlp.fc1.bias", {f}, 0);
    b.split(p + "mlp.fc2.weight", {h, f}, 1);
    b.replicated(p + "mlp.fc2.bias", {h});
  }
  b.replicated("final_layernorm.weight", {h});
  b.replicated("final_layernorm.bias", {h});
  if (!config.tied_embeddings) b.split("output_layer.weight", {v, h}, 0).embedding_or_output = true;
  return b.take();
}

GptParamIds gpt_param_ids(const GptConfig& config) {
  GptParamIds ids;
  ParamId next = 0;
  ids.wte = next++;
  ids.has_wpe = !config.rope;
  if (ids.has_wpe) ids.wpe = next++;
  for (int l = 0; l < config.num_layers; ++l) {
    GptBlockParamIds b{};
    for (ParamId* id : {&b.ln1_w, &b.ln1_b, &b.qkv_w, &b.qkv_b, &b.proj_w, &b.proj_b, &b.ln2_w,
                        &b.ln2_b, &b.fc1_w, &b.fc1_b, &b.fc2_w, &b.fc2_b}) {
      *id = next++;
    }
    ids.blocks.push_back(b);
  }
  ids.lnf_w = next++;
  ids.lnf_b = next++;
  ids.head = config.tied_embeddings ? ids.wte : next++;
  ids.count = next;
  return ids;
}

}  // namespace shardwise
