// shardwise command-line entry point. Any shardwise::Error (bad input) becomes one line on stderr
// and exit code 2, as does a std::filesystem error on a path the user gave; option parsing errors
// exit 2 as well.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <memory>

#include "command_registry.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/core/message_text.hpp"
#ifdef SHARDWISE_CUDA_TRAINING
#include "shardwise/train_cuda/cuda_training.hpp"
#endif

namespace shardwise::cli {

std::vector<Command>& command_registry() {
  static std::vector<Command> commands;
  return commands;
}

bool register_command(std::string name, std::string description, CommandSetup setup) {
  command_registry().push_back({std::move(name), std::move(description), std::move(setup)});
  return true;
}

}  // namespace shardwise::cli

int main(int argc, char** argv) {
  using namespace shardwise;
#ifdef SHARDWISE_CUDA_TRAINING
  register_cuda_training();  // training.device: cuda
#endif
  CLI::App app{"shardwise: Megatron-style distributed-optimizer machinery in C++"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "shardwise 0.1.0");

  auto commands = cli::command_registry();
  std::sort(commands.begin(), commands.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  std::vector<std::pair<CLI::App*, std::function<int()>>> runners;
  for (const auto& command : commands) {
    CLI::App* sub = app.add_subcommand(command.name, command.description);
    runners.emplace_back(sub, command.setup(*sub));
  }

  // Option errors as one line, like every other error (CLI11 adds a second "Run with --help").
  app.failure_message([](const CLI::App*, const CLI::Error& e) {
    return "shardwise: error: " + one_line(e.what()) + " (see --help)\n";
  });
  // CLI11 answers a mistyped subcommand with "A subcommand is required": name it instead.
  if (argc >= 2 && argv[1][0] != '-' &&
      std::none_of(commands.begin(), commands.end(),
                   [&](const cli::Command& c) { return c.name == argv[1]; })) {
    std::string valid;
    for (const auto& command : commands) valid += (valid.empty() ? "" : ", ") + command.name;
    std::fprintf(stderr, "shardwise: error: unknown subcommand '%s' (valid: %s)\n",
                 printable(argv[1]).c_str(), valid.c_str());
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  try {
    for (auto& [sub, run] : runners) {
      if (sub->parsed()) return run();
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "shardwise: error: %s\n", one_line(e.what()).c_str());
    return 2;
  } catch (const std::filesystem::filesystem_error& e) {
    // A path the user gave that cannot be accessed (a symlink loop, no permission): bad input.
    const std::string path = e.path1().empty() ? std::string() : quoted(e.path1()) + ": ";
    std::fprintf(stderr, "shardwise: error: cannot access %s\n",
                 one_line(path + e.code().message()).c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "shardwise: internal error: %s\n", one_line(e.what()).c_str());
    return 1;
  }
  return 0;
}
