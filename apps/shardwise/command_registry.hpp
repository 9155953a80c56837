// Subcommands register themselves here from their own source files (one file per subcommand),
// so adding a subcommand never touches main.cpp.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

namespace shardwise::cli {

// Adds options to the subcommand and returns the function that runs it once parsing succeeded.
// The runner returns the process exit code.
using CommandSetup = std::function<std::function<int()>(CLI::App& subcommand)>;

struct Command {
  std::string name;
  std::string description;
  CommandSetup setup;
};

std::vector<Command>& command_registry();

// Use at namespace scope: `const bool registered = register_command(...);`
bool register_command(std::string name, std::string description, CommandSetup setup);

}  // namespace shardwise::cli
