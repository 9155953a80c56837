// Hyperparameters of the reference GPT decoder.
#pragma once

#include <cstdint>

namespace shardwise {

struct GptConfig {
  int vocab_size = 16;
  int seq_len = 16;       // maximum sequence length (learned position table size)
  int num_layers = 2;
  int hidden = 64;
  int num_heads = 4;
  int ffn_hidden = 256;
  bool rope = false;      // rotary position embeddings instead of a learned table
  bool tied_embeddings = true;
  double init_std = 0.02;

  int head_dim() const { return hidden / num_heads; }
  // Throws InvalidArgument naming the field for impossible sizes (hidden not divisible by
  // heads, odd head_dim with RoPE, non-positive sizes).
  void validate() const;
};

}  // namespace shardwise
