#include "shardwise/train/text_generation.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "shardwise/core/error.hpp"

namespace shardwise {

TokenSampler::TokenSampler(const SamplingOptions& options) : options_(options), rng_(options.seed) {
  SW_REQUIRE(std::isfinite(options.temperature) && options.temperature >= 0, InvalidArgument,
             "sampling temperature must be a finite number >= 0 (got ", options.temperature, ")");
  SW_REQUIRE(options.top_k >= 0, InvalidArgument, "sampling top-k must be >= 0 (got ",
             options.top_k, ")");
}

int TokenSampler::next(std::span<const float> probabilities) {
  SW_REQUIRE(!probabilities.empty(), InvalidArgument, "TokenSampler: empty distribution");
  const int v = static_cast<int>(probabilities.size());
  if (options_.temperature == 0) {
    return static_cast<int>(std::max_element(probabilities.begin(), probabilities.end()) -
                            probabilities.begin());
  }
  // Candidates in order of decreasing probability, ties by index: deterministic.
  std::vector<int> order(v);
  std::iota(order.begin(), order.end(), 0);
  const int keep = options_.top_k > 0 ? std::min(options_.top_k, v) : v;
  std::partial_sort(order.begin(), order.begin() + keep, order.end(), [&](int a, int b) {
    return probabilities[a] != probabilities[b] ? probabilities[a] > probabilities[b] : a < b;
  });
  order.resize(keep);
  // p^(1/T) relative to the largest p, so the top candidate weighs 1 and nothing overflows.
  const double top = std::max(static_cast<double>(probabilities[order.front()]), 1e-300);
  std::vector<double> weight(keep);
  double total = 0;
  for (int i = 0; i < keep; ++i) {
    const double p = std::max(static_cast<double>(probabilities[order[i]]), 0.0);
    weight[i] = std::pow(p / top, 1.0 / options_.temperature);
    total += weight[i];
  }
  // A uniform double in [0, total) from the top 53 bits (the same on every platform, unlike
  // std::uniform_real_distribution).
  const double u = static_cast<double>(rng_() >> 11) * 0x1.0p-53 * total;
  double cumulative = 0;
  for (int i = 0; i < keep; ++i) {
    cumulative += weight[i];
    if (u < cumulative) return order[i];
  }
  return order[keep - 1];  // u within rounding of total
}

std::vector<std::int32_t> generate_tokens(GptModel<float>& model,
                                          const std::vector<std::int32_t>& prompt, int count,
                                          const SamplingOptions& options) {
  const int vocab = model.config().vocab_size, window = model.config().seq_len;
  SW_REQUIRE(!prompt.empty(), InvalidArgument, "the prompt is empty: give at least one token");
  SW_REQUIRE(count >= 0, InvalidArgument, "token count must be >= 0 (got ", count, ")");
  for (std::size_t i = 0; i < prompt.size(); ++i) {
    SW_REQUIRE(prompt[i] >= 0 && prompt[i] < vocab, InvalidArgument, "prompt token ", prompt[i],
               " at position ", i, " is outside the model's vocabulary of ", vocab);
  }
  TokenSampler sampler(options);
  std::vector<std::int32_t> text = prompt, generated;
  for (int n = 0; n < count; ++n) {
    // The model sees at most its context length: the newest `window` tokens.
    const int seq = static_cast<int>(std::min<std::size_t>(text.size(), window));
    const std::int32_t* context = text.data() + (text.size() - seq);
    const std::vector<std::int32_t> no_targets(seq, -1);
    model.forward(context, no_targets.data(), 1, seq);
    const auto probabilities = model.probabilities(0, seq - 1);
    // Weights that overflow in the forward give NaN probabilities; sampling them printed bytes
    // no distribution chose, with exit 0.
    const auto bad = std::find_if(probabilities.begin(), probabilities.end(),
                                  [](float p) { return !std::isfinite(p); });
    SW_REQUIRE(bad == probabilities.end(), FormatError, "the model's output for token ", n + 1,
               " of ", count, " is not finite (", *bad, " for token id ",
               bad - probabilities.begin(), "): the weights overflow in the forward pass");
    const int token = sampler.next(probabilities);
    text.push_back(token);
    generated.push_back(token);
  }
  return generated;
}

}  // namespace shardwise
