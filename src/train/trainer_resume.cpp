// Trainer step 4: resume from a checkpoint (weights, optimizer state resharded to this run's
// layout, step and data position).
#include "shardwise/config/training_config.hpp"
#include "shardwise/core/checked_size.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/core/json_text.hpp"
#include "shardwise/core/message_text.hpp"
#include "tensor_parallel_checkpoint.hpp"
#include "training_run.hpp"

namespace shardwise::train_detail {
namespace {

std::int64_t history_integer(const nlohmann::json& value, std::int64_t low, std::int64_t high,
                             const std::string& where) {
  const bool ok = value.is_number_integer() &&
                  (value.is_number_unsigned()
                       ? value.get<std::uint64_t>() <= static_cast<std::uint64_t>(high)
                       : value.get<std::int64_t>() >= low && value.get<std::int64_t>() <= high);
  SW_REQUIRE(ok, FormatError, where, ": \"batch_history\" holds ", json_excerpt(value),
             " where an integer in [", low, ", ", high, "] belongs");
  return value.get<std::int64_t>();
}

// The checkpoint's batch history: "batch_history" when saved (first steps rising from 0, all
// before `step`), else one segment of its "global_batch" (a checkpoint from before histories
// were saved); empty when the manifest has neither (saved outside the trainer) or an empty list.
std::vector<BatchSegment> saved_batch_history(const nlohmann::json& manifest, std::int64_t step,
                                              const std::string& where) {
  std::vector<BatchSegment> history;
  const auto list = manifest.find("batch_history");
  if (list == manifest.end()) {
    const auto batch = manifest.find("global_batch");
    if (batch != manifest.end()) {
      history.push_back({0, history_integer(*batch, 1, kMaxSampleIndex, where)});
    }
    return history;
  }
  SW_REQUIRE(list->is_array(), FormatError, where,
             ": \"batch_history\" must be a list of [first_step, global_batch]");
  // Empty: a run resumed from a checkpoint without a history saved it; nothing to check.
  for (const nlohmann::json& entry : *list) {
    SW_REQUIRE(entry.is_array() && entry.size() == 2, FormatError, where,
               ": \"batch_history\" entry ", json_excerpt(entry),
               " is not a pair [first_step, global_batch]");
    const std::int64_t first = history_integer(entry[0], 0, step, where);
    SW_REQUIRE(history.empty() ? first == 0 : first > history.back().first_step, FormatError, where,
               ": \"batch_history\" first steps must start at 0 and rise (got ", first, ")");
    history.push_back({first, history_integer(entry[1], 1, kMaxSampleIndex, where)});
  }
  return history;
}

// Samples consumed by the end of step `step` (exclusive) under `history`; nothing on overflow.
std::optional<std::int64_t> samples_through(const std::vector<BatchSegment>& history,
                                            std::int64_t step) {
  std::int64_t total = 0;
  for (std::size_t i = 0; i < history.size(); ++i) {
    const std::int64_t end = i + 1 < history.size() ? history[i + 1].first_step : step;
    const auto part = checked_mul(end - history[i].first_step, history[i].global_batch);
    const auto sum = part ? checked_add(total, *part) : std::nullopt;
    if (!sum) return std::nullopt;
    total = *sum;
  }
  return total;
}

std::string history_text(const std::vector<BatchSegment>& history) {
  if (history.size() == 1) return str_cat("global batch ", history[0].global_batch);
  std::string text = "batch history";
  for (const BatchSegment& s : history) {
    text += str_cat(" [", s.first_step, ", ", s.global_batch, "]");
  }
  return text;
}

// The data position must be the one the saved run reached: an edited or damaged manifest would
// silently train on other samples.
std::vector<BatchSegment> checked_history(const LoadedCheckpoint& loaded) {
  const std::string where =
      str_cat("checkpoint manifest ", quoted(loaded.directory / kCheckpointManifestFile));
  std::vector<BatchSegment> history = saved_batch_history(loaded.manifest, loaded.step, where);
  if (history.empty()) return history;
  const auto expected = samples_through(history, loaded.step);
  SW_REQUIRE(expected && *expected == loaded.consumed_samples, FormatError, where,
             ": trainer.consumed_samples is ", loaded.consumed_samples, " but step ", loaded.step,
             " at ", history_text(history), " gives ",
             expected ? std::to_string(*expected) : std::string("more than 2^63"),
             " samples; the manifest is damaged or was edited (resuming would read the wrong "
             "data)");
  return history;
}

// The architecture fields the weights' shapes do not show: resuming a heads = 2 checkpoint with
// heads = 4 loads every tensor and trains another network (Megatron's check_checkpoint_args
// refuses a differing num_attention_heads too). Checked where the manifest records them.
void check_same_unseen_architecture(const LoadedCheckpoint& loaded, const TrainingConfig& config) {
  const nlohmann::json* saved = saved_model_config(loaded.manifest);
  if (saved == nullptr) return;
  const nlohmann::json ours(to_json(config).at("model"));
  for (const char* key : {"arch", "heads", "position"}) {
    const auto value = saved->find(key);
    if (value == saved->end() || ours.at(key) == *value) continue;
    throw ConfigError(str_cat(
        "checkpoint ", quoted(loaded.directory), " was trained with model.", key, " = ",
        json_excerpt(*value), " and this run has model.", key, " = ", json_excerpt(ours.at(key)),
        ": the weights would load (their shapes agree) into another network; resume with model.",
        key, "=", json_excerpt(*value), " or start a new run"));
  }
}

}  // namespace

std::optional<ResumePoint> resume_from_checkpoint(TrainingModel& m, const RunContext& run,
                                                  const TrainerOptions& options) {
  m.batch_history = {BatchSegment{0, run.global_batch}};
  if (options.load_dir.empty()) return std::nullopt;
  const auto dir = resolve_checkpoint_directory(options.load_dir, options.load_step);
  const LoadedCheckpoint loaded = run.tp > 1 ? load_tensor_parallel_checkpoint(m, run, dir)
                                             : load_checkpoint(dir, model_tensors(m), *m.optimizer,
                                                               run.dp_group(), to_string(m.kind));
  check_same_unseen_architecture(loaded, run.config);
  if (m.device) m.push_to_device();
  const std::int64_t steps = run.config.training.steps;
  SW_REQUIRE(loaded.step <= steps, ConfigError, "checkpoint '", dir.string(), "' is of step ",
             loaded.step, ", beyond training.steps (", steps, ")");
  std::vector<BatchSegment> history = checked_history(loaded);
  if (!history.empty()) {
    // This run continues the saved history; a new segment where its global batch differs.
    if (history.back().global_batch != run.global_batch) {
      history.push_back({loaded.step, run.global_batch});
    }
    m.batch_history = std::move(history);
  } else if (loaded.step > 0) {
    m.batch_history = {};  // unknown before the resume: later resumes cannot check it either
  }
  return ResumePoint{dir.string(), loaded.step, loaded.consumed_samples};
}

}  // namespace shardwise::train_detail
