// Hyperparameters of the reference GPT decoder.
#pragma once

#include <cstdint>
#include <string_view>

namespace shardwise {

struct GptConfig {
  int vocab_size = 16;
  int seq_len = 16;  // maximum sequence length (learned position table size)
  int num_layers = 2;
  int hidden = 64;
  int num_heads = 4;
  int ffn_hidden = 256;
  bool rope = false;  // rotary position embeddings instead of a learned table
  bool tied_embeddings = true;
  double init_std = 0.02;
  // Tensor parallelism pads the vocabulary to a multiple of this times the TP size, as Megatron
  // does (its default, 128), so every TP rank holds an equal slice of the embedding.
  int make_vocab_size_divisible_by = 128;

  int head_dim() const { return hidden / num_heads; }
  // Throws InvalidArgument naming the field for impossible sizes (hidden not divisible by
  // heads, odd head_dim with RoPE, non-positive sizes).
  void validate() const;

  // Vocabulary rows of the embedding at TP size tp: vocab_size itself at tp = 1 (the model is
  // unchanged), else vocab_size rounded up to a multiple of make_vocab_size_divisible_by * tp.
  // The padded rows are never selected and their logits never enter the softmax.
  int padded_vocab_size(int tp) const;
  // validate() plus the TP constraints: tp >= 1 divides num_heads, ffn_hidden and the padded
  // vocabulary. Throws ConfigError naming the field (model.num_heads, model.ffn_hidden, ...) and
  // the TP size as `tp_name` calls it (a CLI's "--tp" rather than the config's "parallel.tp").
  void validate_tensor_parallel(int tp, std::string_view tp_name = "parallel.tp") const;
};

}  // namespace shardwise
