#include "launch_env.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "shardwise/core/error.hpp"
#include "shardwise/core/logging.hpp"
#include "shardwise/core/message_text.hpp"

namespace shardwise::cli {
namespace {

std::optional<int> env_int(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  char* end = nullptr;
  const long parsed = std::strtol(value, &end, 10);
  if (*end != '\0' || parsed < 0) return std::nullopt;
  return static_cast<int>(parsed);
}

}  // namespace

// mpirun tears the whole job down when the first rank exits non-zero: rank 0, which most likely
// fails the same way, gets 2 s to print its line; still running after that, rank 0 passed (the
// file differs on this rank's node, say), so this rank says what failed here.
void report_unless_the_reporting_rank_did(const std::string& message) {
  std::this_thread::sleep_for(std::chrono::seconds(2));
  const std::optional<LaunchEnv> env = launch_env();
  std::fprintf(stderr, "shardwise: error: rank %d: %s\n", env ? env->rank : 0,
               one_line(message).c_str());
}

std::optional<LaunchEnv> launch_env() {
  struct Names {
    const char* rank;
    const char* size;
  };
  for (const Names names :
       {Names{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"}, Names{"PMIX_RANK", "PMIX_SIZE"},
        Names{"PMI_RANK", "PMI_SIZE"}, Names{"SLURM_PROCID", "SLURM_NTASKS"}}) {
    const auto rank = env_int(names.rank);
    if (!rank) continue;
    return LaunchEnv{*rank, env_int(names.size).value_or(1)};
  }
  return std::nullopt;
}

bool reports_for_the_job() {
  const auto env = launch_env();
  return !env || env->rank == 0;
}

void note_missing_launcher() {
  if (!launch_env()) log::info("no MPI launcher detected: running 1 rank; use mpirun -np N");
}

std::optional<TrainingConfig> load_config_once_per_job(const std::string& path,
                                                       const std::vector<std::string>& overrides) {
  const bool reports = reports_for_the_job();
  try {
    TrainingConfig config = load_training_config(path, overrides);
    if (reports) {
      for (const std::string& warning : config_warnings(config)) log::warning(warning);
    }
    return config;
  } catch (const Error& e) {
    if (reports) throw;
    report_unless_the_reporting_rank_did(e.what());
    return std::nullopt;
  }
}

bool check_once_per_job(const std::function<void()>& check) {
  try {
    check();
    return true;
  } catch (const Error& e) {
    if (reports_for_the_job()) throw;
    report_unless_the_reporting_rank_did(e.what());
    return false;
  }
}

}  // namespace shardwise::cli
