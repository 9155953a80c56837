// Only rank 0 writes a run's logs (--log-jsonl, --plot, refit's --json), and each rank checks its
// outputs against its own inputs only. The one input ranks may name differently is --config (its
// contents must agree, not its name): under an MPMD launch (`mpirun -np 1 A : -np 1 B`) rank 0's
// log could be the config file another rank on its node reads, and was written over it.
#pragma once

#include <filesystem>
#include <vector>

#include "shardwise/comm/process_group.hpp"
#include "shardwise/core/command_paths.hpp"

namespace shardwise::cli {

// Collective over `world`: ConfigError on every rank when one of rank 0's `outputs` is the same
// file (same node, device and inode) as the `config` another rank reads.
void check_rank0_outputs_clear_of_configs(ProcessGroup& world, const std::filesystem::path& config,
                                          const std::vector<CommandPath>& outputs);

// Collective over `world`: a rank whose `outputs` name other files than rank 0's (an MPMD launch
// giving --log-jsonl to rank 1 only) warns that they are not written: only rank 0 writes them.
void warn_of_outputs_only_rank0_writes(ProcessGroup& world,
                                       const std::vector<CommandPath>& outputs);

}  // namespace shardwise::cli
