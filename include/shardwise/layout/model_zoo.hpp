// Model zoo: GPT-style dense and MoE transformer specs generated from hyperparameters, and the
// bundled presets (gpt-small, gpt3-175b, llama3-8b/70b/405b, mixtral-8x7b, a DeepSeek-V3-sized
// MoE, tiny test models).
//
// Params are emitted in forward order with Megatron-like names:
//   embedding.word_embeddings.weight            [vocab, hidden]   embedding_or_output
//   embedding.position_embeddings.weight        [max_pos, hidden] (learned positions only)
//   layers.{i}.input_norm.weight (+ .bias)       [hidden]
//   layers.{i}.attn.qkv.weight (+ .bias)         [(heads + 2*kv_heads)*head_dim, hidden], qkv_split
//   layers.{i}.attn.proj.weight (+ .bias)        [hidden, heads*head_dim]
//   layers.{i}.post_attn_norm.weight (+ .bias)   [hidden]
//   dense MLP: layers.{i}.mlp.fc1.weight         [ffn (x2 when gated), hidden]
//              layers.{i}.mlp.fc2.weight         [hidden, ffn]
//   MoE:       layers.{i}.mlp.router.weight      [experts, hidden]  use_muon=false
//              layers.{i}.mlp.experts.{e}.fc1/fc2.weight            expert_parallel
//              layers.{i}.mlp.shared_experts.fc1/fc2.weight         (dense, replicated)
//   final_norm.weight (+ .bias)                  [hidden]
//   output.weight                                [vocab, hidden]    embedding_or_output (untied)
// With tied embeddings there is no output.weight and the word embedding is shared_embedding.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "shardwise/core/dtype.hpp"
#include "shardwise/layout/model_spec.hpp"

namespace shardwise {

// Multi-head latent attention (DeepSeek-V2/V3). The low-rank projections are emitted as plain 2-D
// matrices of the real sizes (no rope/nope split inside them): q_down [q_lora, hidden],
// q_norm [q_lora], q_up [heads*(qk_nope+qk_rope), q_lora], kv_down [kv_lora+qk_rope, hidden],
// kv_norm [kv_lora], kv_up [heads*(qk_nope+v), kv_lora], proj [hidden, heads*v].
struct LatentAttentionConfig {
  std::int64_t q_lora_rank = 0;
  std::int64_t kv_lora_rank = 0;
  std::int64_t qk_nope_head_dim = 0;
  std::int64_t qk_rope_head_dim = 0;
  std::int64_t v_head_dim = 0;

  bool enabled() const { return kv_lora_rank > 0; }
};

struct TransformerConfig {
  std::string name;
  int num_layers = 0;
  std::int64_t hidden_size = 0;
  std::int64_t ffn_hidden_size = 0;  // dense MLP width
  int num_attention_heads = 0;
  int num_query_groups = 0;   // kv heads; 0 = num_attention_heads (plain MHA)
  std::int64_t head_dim = 0;  // 0 = hidden_size / num_attention_heads
  std::int64_t vocab_size = 0;
  std::int64_t max_position_embeddings = 0;  // > 0: learned position embedding table
  bool gated_mlp = true;                     // SwiGLU: fc1 holds gate and up (2 * ffn rows)
  bool tied_embeddings = false;
  bool add_bias = false;        // biases on qkv, proj, fc1, fc2 (GPT-3)
  bool layernorm_bias = false;  // LayerNorm (weight + bias) instead of RMSNorm
  // MoE: layers >= num_dense_layers use num_experts routed experts (0 = dense model).
  int num_experts = 0;
  std::int64_t moe_ffn_hidden_size = 0;
  int num_shared_experts = 0;  // one shared MLP of width num_shared * moe_ffn
  int num_dense_layers = 0;    // leading layers that keep the dense MLP
  LatentAttentionConfig mla;   // enabled() replaces the fused QKV attention
  DType dtype = DType::kBFloat16;

  bool is_moe() const { return num_experts > 0; }
  std::int64_t effective_head_dim() const;
  int effective_query_groups() const;
  // Throws InvalidArgument naming the field for impossible hyperparameters.
  void validate() const;
};

// Parameters of the model in forward order (see the naming table above).
ParamList generate_transformer_params(const TransformerConfig& config);
ModelSpec generate_model_spec(const TransformerConfig& config);

// Names of the bundled presets, in a stable order.
const std::vector<std::string>& bundled_model_names();
// Hyperparameters of a preset (names match ignoring case). Throws InvalidArgument listing the
// presets for an unknown name.
TransformerConfig bundled_model_config(std::string_view name);
ModelSpec bundled_model_spec(std::string_view name);
bool is_bundled_model(std::string_view name);
// "unknown model 'X' (did you mean Y?) (bundled: ...)".
std::string unknown_bundled_model_message(std::string_view name);

}  // namespace shardwise
