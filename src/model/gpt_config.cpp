#include "shardwise/model/gpt_config.hpp"

#include "shardwise/core/error.hpp"

namespace shardwise {

void GptConfig::validate() const {
  auto positive = [](int value, const char* field) {
    SW_REQUIRE(value >= 1, InvalidArgument, "model.", field, " must be >= 1, got ", value);
  };
  positive(vocab_size, "vocab_size");
  positive(seq_len, "seq_len");
  positive(num_layers, "num_layers");
  positive(hidden, "hidden");
  positive(num_heads, "num_heads");
  positive(ffn_hidden, "ffn_hidden");
  SW_REQUIRE(hidden % num_heads == 0, InvalidArgument, "model.hidden (", hidden,
             ") must be divisible by model.num_heads (", num_heads, ")");
  SW_REQUIRE(!rope || head_dim() % 2 == 0, InvalidArgument,
             "model.rope needs an even head dimension, got hidden/heads = ", head_dim());
  SW_REQUIRE(init_std > 0, InvalidArgument, "model.init_std must be > 0, got ", init_std);
}

}  // namespace shardwise
