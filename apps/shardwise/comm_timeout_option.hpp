// `--comm-timeout SECONDS`, the watchdog setting of every subcommand that communicates between
// ranks (train, refit, generate --tp): one definition so the flag reads and behaves the same in
// each.
#pragma once

#include <CLI/CLI.hpp>

namespace shardwise::cli {

// Adds --comm-timeout to `app`, stored in `seconds` (which holds the default, 600 s).
CLI::Option* add_comm_timeout_option(CLI::App& app, double& seconds);

}  // namespace shardwise::cli
