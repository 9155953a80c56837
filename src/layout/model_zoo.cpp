#include "shardwise/layout/model_zoo.hpp"

#include <algorithm>
#include <cctype>
#include <map>

#include "shardwise/core/checked_size.hpp"
#include "shardwise/core/closest_name.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/core/message_text.hpp"
#include "shardwise/layout/param_dtype.hpp"

namespace shardwise {
namespace {

// Appends params in forward order; every param added while `expert_parallel` is set is flagged
// as an expert weight.
class ParamEmitter {
 public:
  explicit ParamEmitter(DType dtype) : dtype_(dtype) {}

  bool expert_parallel = false;

  // Returns the index of the new param (references would dangle as the list grows).
  std::size_t add(std::string name, std::vector<std::int64_t> shape) {
    ParamInfo param;
    param.name = std::move(name);
    param.shape = std::move(shape);
    param.dtype = dtype_;
    param.expert_parallel = expert_parallel;
    params_.push_back(std::move(param));
    return params_.size() - 1;
  }

  ParamInfo& at(std::size_t index) { return params_[index]; }

  // Norm weight, plus a bias for LayerNorm.
  void norm(const std::string& prefix, std::int64_t size, bool with_bias) {
    add(prefix + ".weight", {size});
    if (with_bias) add(prefix + ".bias", {size});
  }

  // Linear weight [out, in] (PyTorch convention), plus a bias [out]; returns the weight's index.
  std::size_t linear(const std::string& prefix, std::int64_t out, std::int64_t in, bool with_bias) {
    const std::size_t weight = add(prefix + ".weight", {out, in});
    if (with_bias) add(prefix + ".bias", {out});
    return weight;
  }

  ParamList take() { return std::move(params_); }

 private:
  DType dtype_;
  ParamList params_;
};

void emit_attention(ParamEmitter& out, const TransformerConfig& c, const std::string& prefix) {
  const std::int64_t hidden = c.hidden_size;
  const std::int64_t heads = c.num_attention_heads;
  if (c.mla.enabled()) {
    const auto& m = c.mla;
    const std::int64_t q_rows = heads * (m.qk_nope_head_dim + m.qk_rope_head_dim);
    if (m.q_lora_rank > 0) {
      out.linear(prefix + ".q_down", m.q_lora_rank, hidden, false);
      out.norm(prefix + ".q_norm", m.q_lora_rank, c.layernorm_bias);
      out.linear(prefix + ".q_up", q_rows, m.q_lora_rank, false);
    } else {
      out.linear(prefix + ".q", q_rows, hidden, false);
    }
    out.linear(prefix + ".kv_down", m.kv_lora_rank + m.qk_rope_head_dim, hidden, false);
    out.norm(prefix + ".kv_norm", m.kv_lora_rank, c.layernorm_bias);
    out.linear(prefix + ".kv_up", heads * (m.qk_nope_head_dim + m.v_head_dim), m.kv_lora_rank,
               false);
    out.linear(prefix + ".proj", hidden, heads * m.v_head_dim, c.add_bias);
    return;
  }
  const std::int64_t head_dim = c.effective_head_dim();
  const std::int64_t q_rows = heads * head_dim;
  const std::int64_t kv_rows = static_cast<std::int64_t>(c.effective_query_groups()) * head_dim;
  const std::size_t qkv = out.linear(prefix + ".qkv", q_rows + 2 * kv_rows, hidden, c.add_bias);
  out.at(qkv).qkv_split = {q_rows, kv_rows, kv_rows};
  out.linear(prefix + ".proj", hidden, q_rows, c.add_bias);
}

void emit_mlp(ParamEmitter& out, const TransformerConfig& c, const std::string& prefix,
              std::int64_t ffn) {
  out.linear(prefix + ".fc1", c.gated_mlp ? 2 * ffn : ffn, c.hidden_size, c.add_bias);
  out.linear(prefix + ".fc2", c.hidden_size, ffn, c.add_bias);
}

void emit_moe(ParamEmitter& out, const TransformerConfig& c, const std::string& prefix) {
  // The router's rows are per-expert logits; orthogonalising it makes little sense.
  const std::size_t router = out.linear(prefix + ".router", c.num_experts, c.hidden_size, false);
  out.at(router).use_muon = false;
  out.expert_parallel = true;
  for (int e = 0; e < c.num_experts; ++e) {
    emit_mlp(out, c, str_cat(prefix, ".experts.", e), c.moe_ffn_hidden_size);
  }
  out.expert_parallel = false;
  if (c.num_shared_experts > 0) {
    emit_mlp(out, c, prefix + ".shared_experts", c.num_shared_experts * c.moe_ffn_hidden_size);
  }
}

std::map<std::string, TransformerConfig, std::less<>> make_presets() {
  std::map<std::string, TransformerConfig, std::less<>> presets;
  auto dense = [](std::string name, int layers, std::int64_t hidden, std::int64_t ffn, int heads,
                  int kv_heads, std::int64_t vocab) {
    TransformerConfig c;
    c.name = std::move(name);
    c.num_layers = layers;
    c.hidden_size = hidden;
    c.ffn_hidden_size = ffn;
    c.num_attention_heads = heads;
    c.num_query_groups = kv_heads;
    c.vocab_size = vocab;
    return c;
  };

  // GPT-3 style test model: LayerNorm with biases, GELU MLP, learned positions, tied embeddings.
  TransformerConfig tiny = dense("gpt-tiny", 2, 64, 256, 4, 4, 512);
  tiny.max_position_embeddings = 128;
  tiny.gated_mlp = false;
  tiny.tied_embeddings = true;
  tiny.add_bias = true;
  tiny.layernorm_bias = true;
  presets[tiny.name] = tiny;

  // Small MoE for tests: 1 dense layer, then 4 routed experts + 1 shared expert.
  TransformerConfig moe_tiny = dense("moe-tiny", 4, 64, 256, 4, 2, 512);
  moe_tiny.num_experts = 4;
  moe_tiny.moe_ffn_hidden_size = 64;
  moe_tiny.num_shared_experts = 1;
  moe_tiny.num_dense_layers = 1;
  presets[moe_tiny.name] = moe_tiny;

  // GPT-2 small (Radford et al. 2019): 12 x 768, 12 heads, GELU MLP of 3072, 1024 learned
  // positions, GPT-2 BPE vocabulary (50257), tied embeddings, biases everywhere: 124,439,808.
  TransformerConfig gpt_small = dense("gpt-small", 12, 768, 3072, 12, 12, 50257);
  gpt_small.max_position_embeddings = 1024;
  gpt_small.gated_mlp = false;
  gpt_small.tied_embeddings = true;
  gpt_small.add_bias = true;
  gpt_small.layernorm_bias = true;
  presets[gpt_small.name] = gpt_small;

  // GPT-3 175B (Brown et al. 2020): 96 x 12288, 96 heads, 2048 positions, GPT-2 BPE vocabulary
  // (50257, unpadded), tied embeddings, biases everywhere.
  TransformerConfig gpt3 = dense("gpt3-175b", 96, 12288, 4 * 12288, 96, 96, 50257);
  gpt3.max_position_embeddings = 2048;
  gpt3.gated_mlp = false;
  gpt3.tied_embeddings = true;
  gpt3.add_bias = true;
  gpt3.layernorm_bias = true;
  presets[gpt3.name] = gpt3;

  // Llama 3 / 3.1 (RMSNorm, SwiGLU, GQA with 8 kv heads, 128256 vocabulary, untied).
  presets["llama3-8b"] = dense("llama3-8b", 32, 4096, 14336, 32, 8, 128256);
  presets["llama3-70b"] = dense("llama3-70b", 80, 8192, 28672, 64, 8, 128256);
  presets["llama3-405b"] = dense("llama3-405b", 126, 16384, 53248, 128, 8, 128256);

  // Mixtral 8x7B: Mistral-7B attention, every layer MoE with 8 SwiGLU experts of width 14336.
  TransformerConfig mixtral = dense("mixtral-8x7b", 32, 4096, 14336, 32, 8, 32000);
  mixtral.num_experts = 8;
  mixtral.moe_ffn_hidden_size = 14336;
  presets[mixtral.name] = mixtral;

  // DeepSeek-V3-sized MoE: 61 layers, first 3 dense (ffn 18432), then 256 routed experts + 1
  // shared expert of width 2048; MLA attention emitted as its plain low-rank matrices (q_lora 1536,
  // kv_lora 512, nope 128, rope 64, v 128); untied 129280 vocabulary; no multi-token-prediction
  // module.
  TransformerConfig deepseek = dense("deepseek-v3", 61, 7168, 18432, 128, 128, 129280);
  deepseek.num_experts = 256;
  deepseek.moe_ffn_hidden_size = 2048;
  deepseek.num_shared_experts = 1;
  deepseek.num_dense_layers = 3;
  deepseek.mla = LatentAttentionConfig{1536, 512, 128, 64, 128};
  presets[deepseek.name] = deepseek;
  return presets;
}

const std::map<std::string, TransformerConfig, std::less<>>& presets() {
  static const auto table = make_presets();
  return table;
}

}  // namespace

std::int64_t TransformerConfig::effective_head_dim() const {
  if (head_dim > 0) return head_dim;
  return num_attention_heads > 0 ? hidden_size / num_attention_heads : 0;
}

int TransformerConfig::effective_query_groups() const {
  return num_query_groups > 0 ? num_query_groups : num_attention_heads;
}

namespace {

// Sizes above what any real model has (core/checked_size.hpp): the spec would take without end
// to generate, or its element counts would overflow.
void require_model_bounds(const TransformerConfig& c, const std::string& who) {
  const auto at_most = [&who](std::int64_t value, std::int64_t limit, const char* what) {
    SW_REQUIRE(value <= limit, InvalidArgument, who, ": ", what, " must be <= ", limit, ", got ",
               value, " (no real model is that large)");
  };
  at_most(c.num_layers, kMaxLayers, "layers");
  at_most(c.hidden_size, kMaxModelDimension, "hidden");
  at_most(c.ffn_hidden_size, kMaxModelDimension, "ffn");
  at_most(c.num_attention_heads, kMaxModelDimension, "heads");
  at_most(c.num_query_groups, kMaxModelDimension, "kv heads");
  at_most(c.head_dim, kMaxModelDimension, "head dim");
  at_most(c.vocab_size, kMaxModelDimension, "vocab");
  at_most(c.max_position_embeddings, kMaxModelDimension, "max positions");
  at_most(c.num_experts, kMaxExperts, "experts");
  at_most(c.moe_ffn_hidden_size, kMaxModelDimension, "moe ffn");
  at_most(c.num_shared_experts, kMaxExperts, "shared experts");
  for (const std::int64_t dim : {c.mla.q_lora_rank, c.mla.kv_lora_rank, c.mla.qk_nope_head_dim,
                                 c.mla.qk_rope_head_dim, c.mla.v_head_dim}) {
    at_most(dim, kMaxModelDimension, "latent attention dim");
  }
  // At most 8 params per expert and 16 others per layer: bound the list the spec will hold.
  const std::int64_t per_layer = 16 + 8 * std::int64_t{c.num_experts};
  checked_product<InvalidArgument>({{"layers", c.num_layers}, {"params per layer", per_layer}},
                                   kMaxSpecParams, str_cat(who, ": params in the spec"));
}

}  // namespace

void TransformerConfig::validate() const {
  const std::string who = str_cat("model config '", printable(name), "'");
  require_model_bounds(*this, who);
  SW_REQUIRE(num_layers >= 1, InvalidArgument, who, ": layers must be >= 1, got ", num_layers);
  SW_REQUIRE(hidden_size >= 1, InvalidArgument, who, ": hidden must be >= 1, got ", hidden_size);
  SW_REQUIRE(num_attention_heads >= 1, InvalidArgument, who, ": heads must be >= 1, got ",
             num_attention_heads);
  SW_REQUIRE(num_query_groups >= 0, InvalidArgument, who, ": kv heads must be >= 0, got ",
             num_query_groups);
  SW_REQUIRE(num_attention_heads % effective_query_groups() == 0, InvalidArgument, who, ": heads (",
             num_attention_heads, ") must be a multiple of kv heads (", effective_query_groups(),
             ")");
  SW_REQUIRE(head_dim >= 0, InvalidArgument, who, ": head dim must be >= 0, got ", head_dim);
  if (!mla.enabled()) {
    SW_REQUIRE(head_dim > 0 || hidden_size % num_attention_heads == 0, InvalidArgument, who,
               ": hidden (", hidden_size, ") must be divisible by heads (", num_attention_heads,
               ") unless a head dim is given");
  } else {
    SW_REQUIRE(mla.q_lora_rank >= 0 && mla.qk_nope_head_dim >= 0 && mla.qk_rope_head_dim >= 0 &&
                   mla.qk_nope_head_dim + mla.qk_rope_head_dim >= 1 && mla.v_head_dim >= 1,
               InvalidArgument, who, ": latent attention dims must be positive");
  }
  SW_REQUIRE(vocab_size >= 1, InvalidArgument, who, ": vocab must be >= 1, got ", vocab_size);
  // The model-spec reader takes floating dtypes only: a spec it would refuse is not written.
  SW_REQUIRE(is_param_dtype(dtype), InvalidArgument, who, ": dtype ", dtype_name(dtype),
             " cannot hold parameters (valid: ", kParamDtypeNames, ")");
  SW_REQUIRE(max_position_embeddings >= 0, InvalidArgument, who,
             ": max positions must be >= 0, got ", max_position_embeddings);
  SW_REQUIRE(num_experts >= 0, InvalidArgument, who, ": experts must be >= 0, got ", num_experts);
  SW_REQUIRE(num_shared_experts >= 0, InvalidArgument, who, ": shared experts must be >= 0, got ",
             num_shared_experts);
  SW_REQUIRE(num_dense_layers >= 0 && num_dense_layers <= num_layers, InvalidArgument, who,
             ": dense layers must be in [0, layers=", num_layers, "], got ", num_dense_layers);
  const bool has_dense_mlp = !is_moe() || num_dense_layers > 0;
  SW_REQUIRE(!has_dense_mlp || ffn_hidden_size >= 1, InvalidArgument, who,
             ": ffn must be >= 1, got ", ffn_hidden_size);
  if (is_moe()) {
    SW_REQUIRE(moe_ffn_hidden_size >= 1, InvalidArgument, who, ": moe ffn must be >= 1, got ",
               moe_ffn_hidden_size);
  } else {
    SW_REQUIRE(num_shared_experts == 0, InvalidArgument, who,
               ": shared experts need routed experts (experts > 0)");
  }
}

ParamList generate_transformer_params(const TransformerConfig& config) {
  config.validate();
  const TransformerConfig& c = config;
  ParamEmitter out(c.dtype);

  const std::size_t embedding =
      out.add("embedding.word_embeddings.weight", {c.vocab_size, c.hidden_size});
  out.at(embedding).embedding_or_output = true;
  out.at(embedding).shared_embedding = c.tied_embeddings;
  if (c.max_position_embeddings > 0) {
    const std::size_t positions =
        out.add("embedding.position_embeddings.weight", {c.max_position_embeddings, c.hidden_size});
    out.at(positions).embedding_or_output = true;
  }

  for (int layer = 0; layer < c.num_layers; ++layer) {
    const std::string prefix = str_cat("layers.", layer);
    out.norm(prefix + ".input_norm", c.hidden_size, c.layernorm_bias);
    emit_attention(out, c, prefix + ".attn");
    out.norm(prefix + ".post_attn_norm", c.hidden_size, c.layernorm_bias);
    if (c.is_moe() && layer >= c.num_dense_layers) {
      emit_moe(out, c, prefix + ".mlp");
    } else {
      emit_mlp(out, c, prefix + ".mlp", c.ffn_hidden_size);
    }
  }

  out.norm("final_norm", c.hidden_size, c.layernorm_bias);
  if (!c.tied_embeddings) {
    const std::size_t head = out.add("output.weight", {c.vocab_size, c.hidden_size});
    out.at(head).embedding_or_output = true;
  }
  return out.take();
}

ModelSpec generate_model_spec(const TransformerConfig& config) {
  ModelSpec spec{config.name, generate_transformer_params(config)};
  // total_numel() sums in int64; the bounds keep each param well inside it, not their sum.
  std::int64_t total = 0;
  for (const ParamInfo& param : spec.params) {
    const auto sum = checked_add(total, param.numel());
    SW_REQUIRE(sum.has_value(), InvalidArgument, "model config '", printable(config.name),
               "': its params hold more than 2^63 elements in all");
    total = *sum;
  }
  return spec;
}

const std::vector<std::string>& bundled_model_names() {
  static const std::vector<std::string> names = {"gpt-tiny",    "moe-tiny",     "gpt-small",
                                                 "gpt3-175b",   "llama3-8b",    "llama3-70b",
                                                 "llama3-405b", "mixtral-8x7b", "deepseek-v3"};
  return names;
}

namespace {

// Bundled names are lower case; users type "llama3-8B" too.
std::string lower_case(std::string_view name) {
  std::string out(name);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

}  // namespace

bool is_bundled_model(std::string_view name) { return presets().count(lower_case(name)) > 0; }

std::string unknown_bundled_model_message(std::string_view name) {
  std::string valid;
  std::vector<std::string_view> names;
  for (const auto& known : bundled_model_names()) {
    valid += str_cat(valid.empty() ? "" : ", ", known);
    names.push_back(known);
  }
  return str_cat("unknown model '", printable(name), "'", did_you_mean(name, names),
                 " (bundled: ", valid, ")");
}

TransformerConfig bundled_model_config(std::string_view name) {
  const auto it = presets().find(lower_case(name));
  SW_REQUIRE(it != presets().end(), InvalidArgument, unknown_bundled_model_message(name));
  return it->second;
}

ModelSpec bundled_model_spec(std::string_view name) {
  return generate_model_spec(bundled_model_config(name));
}

}  // namespace shardwise
