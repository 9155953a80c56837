// Sources of (tokens, targets) training samples. Samples are addressed by a global index, so
// every data-parallel rank can draw its own distinct slice of a global batch without talking to
// the others, and a run resumed from a checkpoint continues from a sample index.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace shardwise {

enum class Split { kTrain, kValidation };

// What evaluation measures (see train/eval_report.hpp): exact match of whole answers, or
// language-model figures (perplexity, bits per byte).
enum class EvalKind { kExactMatch, kLanguageModel };

class TokenDataset {
 public:
  virtual ~TokenDataset() = default;
  virtual int vocab_size() const = 0;
  // Tokens per sample (the model's sequence length).
  virtual int seq_len() const = 0;
  // Fills count samples [first, first + count) of the split: tokens and next-token targets,
  // each count * seq_len() values; targets < 0 are not scored.
  virtual void fill(Split split, std::int64_t first, int count, std::int32_t* tokens,
                    std::int32_t* targets) const = 0;
  // Number of validation samples an evaluation uses.
  virtual std::int64_t validation_size() const = 0;
  virtual std::string describe() const = 0;
  // The same value on every rank that reads the same data (and, with overwhelming likelihood,
  // another on a rank that reads other data): the trainer's ranks compare it at startup.
  virtual std::uint64_t fingerprint() const = 0;
  virtual EvalKind eval_kind() const { return EvalKind::kExactMatch; }
  // Whether each token is one byte of text (then loss in bits is bits per byte).
  virtual bool byte_level() const { return false; }
  // What the user should hear about this data and the config together (rank 0 prints them with
  // the config's warnings).
  virtual std::vector<std::string> warnings() const { return {}; }
};

}  // namespace shardwise
