// Path options. An empty value - what `--load "$CKPT"` passes when CKPT is unset - must not read
// as "option not given": `train --load ""` silently started a fresh run and `--save ""` saved
// nothing. This validator refuses it (exit 2) before the command runs.
#pragma once

#include <CLI/CLI.hpp>

namespace shardwise::cli {

CLI::Validator non_empty_path();
// Refuses an empty value of any other option: given as "" it would read as "not given".
CLI::Validator non_empty_value();

}  // namespace shardwise::cli
