// Every rank of a job must run with the same settings: ranks whose configs, overrides or options
// differ (a node's copy of a file, a per-rank environment, a script that branches on the rank)
// otherwise crash in MPI (MPI_ERR_TRUNCATE), wait out the comm watchdog, or finish with wrong
// results and exit 0. The CLI checks its config and options, the Python wrapper its arguments.
#pragma once

#include <nlohmann/json.hpp>

#include "shardwise/comm/process_group.hpp"

namespace shardwise {

// Collective over `group`: ConfigError on every rank unless all ranks hold the same `settings`
// (one small all-gather when they agree). When they do not, the error names the first setting
// that differs and this rank's value of it ("training.grad_accumulation", say).
void check_settings_agree(ProcessGroup& group, const nlohmann::ordered_json& settings);

}  // namespace shardwise
