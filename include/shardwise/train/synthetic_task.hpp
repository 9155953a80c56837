// Built-in character-level tasks generated deterministically from a seed, so the main job needs
// no download: multi-digit addition ("123+456=" -> reversed sum "975" then "."), and sorting a
// string of digits. Only answer tokens are scored. A fixed, hash-selected tenth of all problems
// is held out: training never draws them, validation draws only them, so exact-match accuracy on
// validation measures generalisation.
#pragma once

#include <cstdint>
#include <string>

#include "shardwise/train/token_dataset.hpp"

namespace shardwise {

enum class SyntheticTaskKind { kAddition, kSort };

class SyntheticTaskDataset final : public TokenDataset {
 public:
  // digits: operand digits for addition, string length for sort.
  SyntheticTaskDataset(SyntheticTaskKind kind, int digits, std::uint64_t seed,
                       std::int64_t validation_samples);

  int vocab_size() const override { return kVocab; }
  int seq_len() const override { return seq_len_; }
  void fill(Split split, std::int64_t first, int count, std::int32_t* tokens,
            std::int32_t* targets) const override;
  std::int64_t validation_size() const override { return validation_samples_; }
  std::string describe() const override;
  std::uint64_t fingerprint() const override;

  // Text of one sample (for logs and tests), e.g. "042+917=9590.".
  std::string sample_text(Split split, std::int64_t index) const;

  // Token alphabet: digits 0-9, then '+', '=', '.', '>'.
  static constexpr int kVocab = 14;
  static char token_char(int token);

 private:
  // The full character sequence of sample `index` of `split` (seq_len + 1 tokens).
  std::vector<std::int32_t> sequence(Split split, std::int64_t index) const;
  // Number of leading sequence positions that are prompt (not scored as targets).
  int prompt_length() const;

  SyntheticTaskKind kind_;
  int digits_;
  std::uint64_t seed_;
  std::int64_t validation_samples_;
  int seq_len_;
};

}  // namespace shardwise
