#include "shardwise/train/synthetic_task.hpp"

#include <algorithm>

#include "shardwise/core/error.hpp"
#include "shardwise/core/fnv1a.hpp"
#include "shardwise/core/hash_mix.hpp"

namespace shardwise {

namespace {

constexpr int kPlus = 10, kEquals = 11, kEnd = 12, kArrow = 13;

// A problem is held out for validation when a seed-independent hash of its digits says so:
// the same tenth of all problems is held out in every run.
bool is_held_out(const std::vector<std::int32_t>& problem_digits) {
  std::uint64_t h = 0x51ed270b27a6f2c3ull;
  for (auto d : problem_digits) h = hash_mix(h ^ static_cast<std::uint64_t>(d));
  return h % 10 == 0;
}

std::int64_t pow10(int digits) {
  std::int64_t p = 1;
  for (int i = 0; i < digits; ++i) p *= 10;
  return p;
}

void append_digits(std::vector<std::int32_t>& out, std::int64_t value, int width) {
  std::vector<std::int32_t> ds(width);
  for (int i = width - 1; i >= 0; --i) {
    ds[i] = static_cast<std::int32_t>(value % 10);
    value /= 10;
  }
  out.insert(out.end(), ds.begin(), ds.end());
}

}  // namespace

SyntheticTaskDataset::SyntheticTaskDataset(SyntheticTaskKind kind, int digits, std::uint64_t seed,
                                           std::int64_t validation_samples)
    : kind_(kind), digits_(digits), seed_(seed), validation_samples_(validation_samples) {
  SW_REQUIRE(digits >= 1 && digits <= 9, InvalidArgument, "data.digits must be in [1, 9], got ",
             digits);
  SW_REQUIRE(validation_samples >= 1, InvalidArgument, "data.eval_samples must be >= 1, got ",
             validation_samples);
  const int length = kind == SyntheticTaskKind::kAddition ? 3 * digits + 4 : 2 * digits + 2;
  seq_len_ = length - 1;
}

char SyntheticTaskDataset::token_char(int token) {
  static constexpr char kChars[] = "0123456789+=.>";
  return token >= 0 && token < kVocab ? kChars[token] : '?';
}

int SyntheticTaskDataset::prompt_length() const {
  return kind_ == SyntheticTaskKind::kAddition ? 2 * digits_ + 2 : digits_ + 1;
}

std::vector<std::int32_t> SyntheticTaskDataset::sequence(Split split, std::int64_t index) const {
  const bool want_held_out = split == Split::kValidation;
  std::uint64_t state =
      hash_mix(seed_ ^ hash_mix(static_cast<std::uint64_t>(index) * 2 + want_held_out));
  for (;;) {
    std::vector<std::int32_t> seq;
    std::vector<std::int32_t> problem;
    if (kind_ == SyntheticTaskKind::kAddition) {
      const auto range = static_cast<std::uint64_t>(pow10(digits_));
      state = hash_mix(state);
      const auto a = static_cast<std::int64_t>(state % range);
      state = hash_mix(state);
      const auto b = static_cast<std::int64_t>(state % range);
      append_digits(seq, a, digits_);
      seq.push_back(kPlus);
      append_digits(seq, b, digits_);
      seq.push_back(kEquals);
      problem = seq;
      std::vector<std::int32_t> sum;
      append_digits(sum, a + b, digits_ + 1);
      seq.insert(seq.end(), sum.rbegin(), sum.rend());  // least significant digit first
    } else {
      for (int i = 0; i < digits_; ++i) {
        state = hash_mix(state);
        seq.push_back(static_cast<std::int32_t>(state % 10));
      }
      problem = seq;
      seq.push_back(kArrow);
      std::vector<std::int32_t> sorted = problem;
      std::sort(sorted.begin(), sorted.end());
      seq.insert(seq.end(), sorted.begin(), sorted.end());
    }
    seq.push_back(kEnd);
    if (is_held_out(problem) == want_held_out) return seq;
    state = hash_mix(state ^ 0xa5a5a5a5ull);  // draw another problem from the same stream
  }
}

void SyntheticTaskDataset::fill(Split split, std::int64_t first, int count, std::int32_t* tokens,
                                std::int32_t* targets) const {
  const int prompt = prompt_length();
  for (int s = 0; s < count; ++s) {
    const auto seq = sequence(split, first + s);
    for (int t = 0; t < seq_len_; ++t) {
      tokens[std::int64_t{s} * seq_len_ + t] = seq[t];
      // Position t predicts seq[t + 1]; only the answer (after the prompt) is scored.
      targets[std::int64_t{s} * seq_len_ + t] = t + 1 >= prompt ? seq[t + 1] : -1;
    }
  }
}

std::string SyntheticTaskDataset::sample_text(Split split, std::int64_t index) const {
  std::string text;
  for (auto token : sequence(split, index)) text += token_char(token);
  return text;
}

std::string SyntheticTaskDataset::describe() const {
  return str_cat(kind_ == SyntheticTaskKind::kAddition ? "addition" : "sort", " of ", digits_,
                 "-digit numbers (", seq_len_, " tokens/sample, held-out validation of ",
                 validation_samples_, " samples)");
}

// Generated from its settings alone: the same settings make the same samples.
std::uint64_t SyntheticTaskDataset::fingerprint() const {
  Fnv1a hash;
  for (const std::int64_t v :
       {static_cast<std::int64_t>(kind_), std::int64_t{digits_}, static_cast<std::int64_t>(seed_),
        validation_samples_, std::int64_t{seq_len_}}) {
    hash.integer(v);
  }
  return hash.value();
}

}  // namespace shardwise
