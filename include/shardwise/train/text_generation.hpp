// Sampling text from a trained GPT: each new token is drawn from the model's next-token
// distribution given the last seq_len tokens (prompt and what was generated so far), sharpened or
// flattened by a temperature and optionally cut to the k most likely tokens. The draws come from
// a seeded generator, so the same model, prompt and options give the same text.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "shardwise/model/gpt_model.hpp"

namespace shardwise {

struct SamplingOptions {
  double temperature = 0.8;  // 0: greedy (always the most likely token)
  int top_k = 0;             // > 0: sample among the k most likely tokens only
  std::uint64_t seed = 0;
};

// Draws token ids from distributions (probabilities summing to ~1).
class TokenSampler {
 public:
  // Throws InvalidArgument for a negative or non-finite temperature or a negative top_k.
  explicit TokenSampler(const SamplingOptions& options);
  // Temperature 0: the lowest index among the largest probabilities. Otherwise index i with
  // probability proportional to p_i^(1/temperature) among the top_k largest (ties by index).
  int next(std::span<const float> probabilities);

 private:
  SamplingOptions options_;
  std::mt19937_64 rng_;
};

// Appends `count` sampled tokens to `prompt` and returns only the new ones. Throws
// InvalidArgument for an empty prompt or a prompt token outside the model's vocabulary.
std::vector<std::int32_t> generate_tokens(GptModel<float>& model,
                                          const std::vector<std::int32_t>& prompt, int count,
                                          const SamplingOptions& options);

}  // namespace shardwise
