#include "trainer_guards.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <filesystem>
#include <fstream>
#include <thread>

#include "shardwise/comm/device_mapping.hpp"
#include "shardwise/comm/rank_flags.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/core/finite_values.hpp"
#include "shardwise/core/logging.hpp"
#include "shardwise/core/message_text.hpp"
#include "shardwise/core/output_preflight.hpp"
#include "shardwise/train/memory_estimate.hpp"
#include "shardwise/train/nonfinite_steps.hpp"

namespace shardwise::train_detail {
namespace {

// 30 looks, 100 ms apart.
constexpr int kSharedSaveRootAttempts = 30;

// The lock file's owner line as this rank reads it ("" when it cannot).
std::string read_lock_owner(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::string line;
  std::getline(in, line);  // stays empty when the file cannot be opened
  return line;
}

// Every rank writes its part of each checkpoint into the step directory rank 0 creates under
// --save, so a --save that is a directory of each node's own disk fails only at the first save,
// after the work. Each rank must see the lock file rank 0 holds there, with rank 0's owner line.
// A rank that does not looks again for a few seconds (a network file system may answer from a
// cache of names it looked up before).
void require_shared_save_root(ProcessGroup& world, const std::string& save_dir) {
  if (world.size() < 2) return;
  const std::filesystem::path file = std::filesystem::path(save_dir) / kCheckpointLockFile;
  const std::string rank0 =
      broadcast_text(world, world.rank() == 0 ? read_lock_owner(file) : "", 0);
  if (rank0.empty()) return;  // no owner line recorded (best effort): nothing to compare
  bool seen = world.rank() == 0;
  for (int attempt = 0; !seen && attempt < kSharedSaveRootAttempts; ++attempt) {
    if (attempt > 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    seen = read_lock_owner(file) == rank0;
  }
  const std::vector<int> blind = ranks_with_flag(world, !seen);
  SW_REQUIRE(blind.empty(), ConfigError, "--save ", quoted(std::filesystem::path(save_dir)),
             " is not one directory for every rank: rank(s) ", rank_list(blind),
             " do not find the lock file rank 0 holds there (", quoted(file), ", owner line '",
             printable(rank0, 200),
             "'); every rank writes its part of each checkpoint into the directory rank 0 creates "
             "under --save, so it must be storage that all nodes share (the first save would "
             "fail, after the work)");
}

// Ranks sharing this host's memory (memory is per host, not per rank): the launcher's local
// size, at most the job's size.
int ranks_on_this_host(int world_size) {
  return std::min(local_size_from_environment().value_or(1), world_size);
}

}  // namespace

std::unique_ptr<CheckpointRootLock> prepare_outputs(ProcessGroup& world, const OutputPaths& paths,
                                                    bool verbose) {
  std::unique_ptr<CheckpointRootLock> lock;
  std::string failure;
  if (world.rank() == 0) {
    try {
      if (!paths.log_jsonl.empty()) preflight_output_file(paths.log_jsonl, "--log-jsonl");
      if (!paths.plot.empty()) preflight_output_file(paths.plot, "--plot");
      if (!paths.save_dir.empty()) {
        preflight_output_directory(paths.save_dir, "--save");
        // Each save replaces DIR/latest: a FIFO or device there would only fail the first save,
        // and a symlink would have the save write over its target.
        require_replaceable_latest_pointer(paths.save_dir);
        preflight_output_file(std::filesystem::path(paths.save_dir) / kCheckpointLatestFile,
                              "--save");
        lock = std::make_unique<CheckpointRootLock>(paths.save_dir);
        if (verbose && lock->removed_leftovers() > 0) {
          log::info("removed ", lock->removed_leftovers(), " leftover(s) of interrupted saves in '",
                    paths.save_dir, "'");
        }
      }
    } catch (const std::exception& e) {  // std::filesystem errors too: every rank must hear
      failure = e.what();
      if (failure.empty()) failure = "output check failed";
    }
  }
  failure = broadcast_text(world, failure, 0);
  if (!failure.empty()) throw IoError(failure);
  if (!paths.save_dir.empty()) require_shared_save_root(world, paths.save_dir);
  return lock;
}

void require_memory(ProcessGroup& world, const GptConfig& model, const TrainingConfig& config,
                    int optimizer_shards) {
  const MemoryEstimate estimate = estimate_training_memory(
      model, config.training.micro_batch_size, config.data.eval_samples, optimizer_shards);
  check_on_every_rank(
      world,
      [&] {
        const int ranks = ranks_on_this_host(world.size());
        require_memory_fits(estimate, ranks, available_memory_bytes());
        // The ranks MPI counts on this host share its container (pods have host names of their
        // own), so they share its cgroup too.
        require_memory_fits(estimate, ranks, cgroup_memory_left_bytes(),
                            "the memory cgroup's limit less its usage");
        require_address_space_fits(estimate, address_space_left_bytes());
      },
      "this run does not fit in the available memory");
}

void check_on_every_rank(ProcessGroup& world, const std::function<void()>& check,
                         const std::string& what) {
  const std::vector<int> failed = run_on_every_rank(world, check);
  SW_REQUIRE(failed.empty(), ConfigError, what, " on rank(s) ", rank_list(failed),
             " (see their errors)");
}

void require_same_data_on_every_rank(ProcessGroup& world, const TokenDataset& data,
                                     const DataConfig& config) {
  const std::vector<int> differ = ranks_differing_from_rank0(world, data.fingerprint());
  if (differ.empty()) return;
  const std::string files =
      config.val_path.empty()
          ? str_cat("data.path '", config.path, "'")
          : str_cat("data.path '", config.path, "' / data.val_path '", config.val_path, "'");
  throw ConfigError(str_cat(files, " does not hold the same tokens on every rank: rank(s) ",
                            rank_list(differ),
                            " read other data than rank 0 (storage each node has its own copy "
                            "of?); every rank must read the same files"));
}

void require_finite_weights(ProcessGroup& group, const std::vector<ModelTensor>& model,
                            std::int64_t step) {
  std::string bad;
  for (const ModelTensor& t : model) {
    if (t.values.dtype != DType::kFloat32 || !bad.empty()) continue;
    const float* v = t.values.as<float>();
    const std::int64_t i = first_nonfinite(v, t.values.numel);
    if (i < t.values.numel) bad = str_cat("'", t.name, "' element ", i, " is ", v[i]);
  }
  const bool finite = all_ranks_agree(group, bad.empty());
  SW_REQUIRE(finite, NonFiniteTrainingError, "step ", step, ": the weights are not finite (",
             bad.empty() ? std::string("on another rank") : bad,
             "); stopping without saving a checkpoint from this state");
}

void require_finite_eval(const EvalMetrics& eval) {
  SW_REQUIRE(std::isfinite(eval.eval_loss), NonFiniteTrainingError, "step ", eval.step,
             ": non-finite held-out evaluation (loss ", eval.eval_loss,
             ") after this step's update; stopping without saving a checkpoint from this state");
}

}  // namespace shardwise::train_detail
