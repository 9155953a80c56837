// What the job launcher (mpirun, srun) told this process, read from the environment before MPI
// starts: lets the CLI report config errors once per job and say when no launcher is present.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "shardwise/config/training_config.hpp"

namespace shardwise::cli {

struct LaunchEnv {
  int rank = 0;
  int size = 1;
};

// Rank and size from Open MPI (OMPI_COMM_WORLD_*), PMI/PMIx (PMI_*, PMIX_RANK) or Slurm
// (SLURM_PROCID/SLURM_NTASKS); nullopt when no launcher variables are set.
std::optional<LaunchEnv> launch_env();

// Whether this process reports job-wide messages: rank 0, or the only process.
bool reports_for_the_job();

// For a rank other than the reporting one whose own input failed a check that every rank runs:
// prints "shardwise: error: rank N: <message>" unless the job ended within 2 s (rank 0 failed
// the same way and reported it).
void report_unless_the_reporting_rank_did(const std::string& message);

// Prints "no MPI launcher detected: running 1 rank; use mpirun -np N" when no launcher is set.
void note_missing_launcher();

// Loads a training config. On rank 0 (or without a launcher) errors propagate and warnings are
// logged; other ranks stay silent and get nullopt on error, so the job reports each problem once
// and every rank can exit 2.
std::optional<TrainingConfig> load_config_once_per_job(const std::string& path,
                                                       const std::vector<std::string>& overrides);

// Runs `check` (e.g. check_command_paths) on every rank before MPI starts. Its errors propagate on
// rank 0 (or without a launcher); other ranks stay silent and get false, so the job reports each
// problem once and every rank can exit 2.
bool check_once_per_job(const std::function<void()>& check);

}  // namespace shardwise::cli
