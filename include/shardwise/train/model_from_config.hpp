// The dataset and the GPT architecture a training config describes (what the trainer builds, and
// what `shardwise refit` builds to run the model on a held-out batch).
#pragma once

#include <memory>

#include "shardwise/config/training_config.hpp"
#include "shardwise/model/gpt_config.hpp"
#include "shardwise/train/token_dataset.hpp"

namespace shardwise {

// The data source of `config.data` (synthetic task, text or token file).
std::unique_ptr<TokenDataset> make_token_dataset(const TrainingConfig& config);

// The GPT of `config.model` over `data`'s vocabulary and sequence length; validated for
// parallel.tp (ConfigError naming the field).
GptConfig gpt_config_for(const TrainingConfig& config, const TokenDataset& data);

}  // namespace shardwise
