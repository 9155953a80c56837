#include "shardwise/train/eval_report.hpp"

#include <cmath>
#include <numbers>

#include "shardwise/core/error.hpp"

namespace shardwise {

double perplexity_from_loss(double nats_per_token) { return std::exp(nats_per_token); }

double bits_from_nats(double nats) { return nats / std::numbers::ln2; }

void add_language_model_metrics(EvalMetrics& e, const TokenDataset& data) {
  if (data.eval_kind() != EvalKind::kLanguageModel) return;
  e.perplexity = perplexity_from_loss(e.eval_loss);
  if (data.byte_level()) e.bits_per_byte = bits_from_nats(e.eval_loss);
}

nlohmann::ordered_json eval_record(const EvalMetrics& e) {
  nlohmann::ordered_json record = {
      {"step", e.step}, {"eval_loss", e.eval_loss}, {"accuracy", e.accuracy}};
  if (e.perplexity) record["val_perplexity"] = *e.perplexity;
  if (e.bits_per_byte) record["val_bits_per_byte"] = *e.bits_per_byte;
  return record;
}

std::string eval_summary(const EvalMetrics& e) {
  if (!e.perplexity) {
    return str_cat("loss ", e.eval_loss, ", exact-match accuracy ", e.accuracy * 100, "%");
  }
  std::string out = str_cat("loss ", e.eval_loss);
  if (e.bits_per_byte) out += str_cat(", ", *e.bits_per_byte, " bits/byte");
  return out + str_cat(", perplexity ", *e.perplexity);
}

}  // namespace shardwise
