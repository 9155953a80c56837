#include "shardwise/model/gpt_config.hpp"

#include <cstdint>
#include <limits>

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
             "rope position embeddings (model.position: rope) need an even head dimension, got "
             "hidden/heads = ",
             head_dim());
  SW_REQUIRE(init_std > 0, InvalidArgument, "model.init_std must be > 0, got ", init_std);
  positive(make_vocab_size_divisible_by, "make_vocab_size_divisible_by");
}

int GptConfig::padded_vocab_size(int tp) const {
  SW_REQUIRE(tp >= 1, ConfigError, "parallel.tp must be >= 1, got ", tp);
  if (tp == 1) return vocab_size;
  const std::int64_t multiple = std::int64_t{make_vocab_size_divisible_by} * tp;
  const std::int64_t padded = (vocab_size + multiple - 1) / multiple * multiple;
  SW_REQUIRE(padded <= std::numeric_limits<int>::max(), ConfigError, "model.vocab_size ",
             vocab_size, " padded to a multiple of model.make_vocab_size_divisible_by (",
             make_vocab_size_divisible_by, ") x parallel.tp (", tp, ") overflows");
  return static_cast<int>(padded);
}

void GptConfig::validate_tensor_parallel(int tp, std::string_view tp_name) const {
  validate();
  SW_REQUIRE(tp >= 1, ConfigError, tp_name, " must be >= 1, got ", tp);
  SW_REQUIRE(num_heads % tp == 0, ConfigError, "model.num_heads (", num_heads,
             ") must be divisible by ", tp_name, " (", tp, ")");
  SW_REQUIRE(ffn_hidden % tp == 0, ConfigError, "model.ffn_hidden (", ffn_hidden,
             ") must be divisible by ", tp_name, " (", tp, ")");
  padded_vocab_size(tp);  // a multiple of tp by construction; throws when it overflows
}

}  // namespace shardwise
