// Real-data sources: a raw text file read as byte-level tokens (vocabulary 256), or uint16 token
// shards in llm.c's .bin layout (a 256 x int32 header: magic 20240520, version 1, token count;
// then the tokens). Training samples are windows at positions drawn from the sample index; the
// validation split is a separate file when given, else the last tenth of the training file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "shardwise/train/token_dataset.hpp"

namespace shardwise {

// Reads all tokens of one file; throws FormatError naming the file for a bad or truncated file.
std::vector<std::int32_t> read_text_tokens(const std::string& path);
std::vector<std::int32_t> read_bin_tokens(const std::string& path);
// Writes tokens in the llm.c .bin layout (for tests and data preparation), atomically.
void write_bin_tokens(const std::string& path, const std::vector<std::uint16_t>& tokens);

class TokenFileDataset final : public TokenDataset {
 public:
  // vocab_size: 256 for text; for .bin, 1 + the largest token id seen unless given (> 0).
  TokenFileDataset(std::vector<std::int32_t> train_tokens, std::vector<std::int32_t> val_tokens,
                   int seq_len, int vocab_size, std::uint64_t seed, std::int64_t validation_samples,
                   std::string description);

  int vocab_size() const override { return vocab_size_; }
  int seq_len() const override { return seq_len_; }
  void fill(Split split, std::int64_t first, int count, std::int32_t* tokens,
            std::int32_t* targets) const override;
  std::int64_t validation_size() const override { return validation_samples_; }
  std::string describe() const override { return description_; }
  // Every token of both splits (they are in memory already; read at several GB/s).
  std::uint64_t fingerprint() const override;
  EvalKind eval_kind() const override { return EvalKind::kLanguageModel; }
  // A vocabulary of at most 256 is read as bytes (text files; .bin files written by
  // scripts/prepare_fortunes.py); subword tokenizers have far larger vocabularies.
  bool byte_level() const override { return vocab_size_ <= 256; }
  // data.eval_samples beyond the validation part's whole samples (evaluation wraps around).
  std::vector<std::string> warnings() const override;

 private:
  std::vector<std::int32_t> train_, val_;
  int seq_len_;
  int vocab_size_;
  std::uint64_t seed_;
  std::int64_t validation_samples_;
  bool held_out_;  // the validation part is the last tenth of the training file
  std::string description_;
};

}  // namespace shardwise
