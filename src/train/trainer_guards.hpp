// Internal to the trainer: the checks run_training makes before it starts (output paths, the
// --save root's lock, memory) and before it saves (finite weights). Each is collective over the
// group it is given, so a failure on one rank stops every rank instead of leaving the others
// waiting in the next collective.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "shardwise/checkpoint/checkpoint.hpp"
#include "shardwise/checkpoint/checkpoint_root_lock.hpp"
#include "shardwise/comm/process_group.hpp"
#include "shardwise/config/training_config.hpp"
#include "shardwise/model/gpt_config.hpp"
#include "shardwise/train/token_dataset.hpp"
#include "shardwise/train/trainer.hpp"

namespace shardwise::train_detail {

struct OutputPaths {
  std::string save_dir, log_jsonl, plot;
};

// Rank 0 (which writes all of them) preflights every output path and takes the save root's lock
// (nullptr when there is no save_dir, and on other ranks). Throws IoError on every rank when
// rank 0 failed, with rank 0's message.
std::unique_ptr<CheckpointRootLock> prepare_outputs(ProcessGroup& world, const OutputPaths& paths,
                                                    bool verbose);

// Runs `check` on this rank and makes its outcome every rank's (run_on_every_rank): where it threw,
// that exception is rethrown, and every other rank throws ConfigError("<what> on rank(s) <the
// ranks where it threw> (see their errors)").
void check_on_every_rank(ProcessGroup& world, const std::function<void()>& check,
                         const std::string& what);

// Refuses (ConfigError, on every rank) a model that cannot fit in this host's available memory.
void require_memory(ProcessGroup& world, const GptConfig& model, const TrainingConfig& config,
                    int optimizer_shards);

// Refuses (ConfigError, on every rank, naming the ranks) a job whose ranks read other data than
// rank 0 under the same data.path (storage each node has its own copy of): data parallel would
// train on two datasets and tensor-parallel ranks would compute one batch from two, silently.
void require_same_data_on_every_rank(ProcessGroup& world, const TokenDataset& data,
                                     const DataConfig& config);

// Throws NonFiniteTrainingError (the held-out loss is summed over every rank, so every rank
// throws) when an evaluation's loss is NaN or infinite. A training step's loss is computed before
// its update, so without this a run whose last update overflowed the weights would end with
// exit 0 and a NaN held-out loss.
void require_finite_eval(const EvalMetrics& eval);

// Throws NonFiniteTrainingError on every rank when a weight is NaN or infinite on any rank.
void require_finite_weights(ProcessGroup& group, const std::vector<ModelTensor>& model,
                            std::int64_t step);

}  // namespace shardwise::train_detail
