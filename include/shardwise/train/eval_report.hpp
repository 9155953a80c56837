// What a held-out evaluation reports, by kind of data. Synthetic tasks have one right answer per
// sample, so exact match is the figure to read. Language-model data (text files and token files)
// has none: there the figures are perplexity, exp(mean cross-entropy in nats per token), and,
// when every token is one byte, bits per byte (the cross-entropy in bits), which compares
// across models and tokenizers.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "shardwise/train/token_dataset.hpp"
#include "shardwise/train/trainer.hpp"

namespace shardwise {

double perplexity_from_loss(double nats_per_token);
double bits_from_nats(double nats);

// Fills e.perplexity (language-model data) and e.bits_per_byte (byte-level data) from
// e.eval_loss.
void add_language_model_metrics(EvalMetrics& e, const TokenDataset& data);

// One JSONL record: step, eval_loss, accuracy, then val_perplexity / val_bits_per_byte when set.
nlohmann::ordered_json eval_record(const EvalMetrics& e);

// The figures a log line shows: "loss L, exact-match accuracy A%" for synthetic tasks,
// "loss L, B bits/byte, perplexity P" for language-model data.
std::string eval_summary(const EvalMetrics& e);

}  // namespace shardwise
