// shardwise command-line entry point. Any shardwise::Error (bad input) becomes one line on stderr
// and exit code 2, as does a std::filesystem error on a path the user gave; option parsing errors
// exit 2 as well.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <iostream>
#include <memory>

#include "command_registry.hpp"
#include "launch_env.hpp"
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

namespace {

// A command-line mistake, printed once per job: under mpirun every rank has it, and rank 0 says so.
void report_misuse(const std::string& message) {
  if (shardwise::cli::reports_for_the_job()) {
    std::fprintf(stderr, "shardwise: error: %s\n", message.c_str());
  } else {
    shardwise::cli::report_unless_the_reporting_rank_did(message);
  }
}

// A full disk or a file-size limit under `> FILE` must not end a command with exit 0 and its
// output cut short: flush what is buffered and fail (exit 2) if any of it was not written.
int finish_standard_output(int rc) {
  std::cout.flush();
  const bool stream_failed = std::cout.fail();
  errno = 0;
  if (std::fflush(stdout) == 0 && !std::ferror(stdout) && !stream_failed) return rc;
  std::fprintf(stderr, "shardwise: error: cannot write standard output: %s\n",
               errno != 0 ? std::strerror(errno) : "a write failed (disk full?)");
  return rc == 0 ? 2 : rc;
}

int run_command(int argc, char** argv);

}  // namespace

int main(int argc, char** argv) { return finish_standard_output(run_command(argc, argv)); }

namespace {

int run_command(int argc, char** argv) {
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

  // CLI11 answers a mistyped subcommand with "A subcommand is required": name it instead.
  if (argc >= 2 && argv[1][0] != '-' &&
      std::none_of(commands.begin(), commands.end(),
                   [&](const cli::Command& c) { return c.name == argv[1]; })) {
    std::string valid;
    for (const auto& command : commands) valid += (valid.empty() ? "" : ", ") + command.name;
    report_misuse(str_cat("unknown subcommand '", printable(argv[1]), "' (valid: ", valid, ")"));
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version: every rank answers
    // One line, like every other error (CLI11's own message adds "Run with --help").
    report_misuse(one_line(e.what()) + " (see --help)");
    return 2;
  }
  try {
    for (auto& [sub, run] : runners) {
      if (sub->parsed()) return run();
    }
  } catch (const Error& e) {
    // Once per job when every rank has it; a rank alone in its mistake (an option only it was
    // given) says which rank it is.
    report_misuse(one_line(e.what()));
    return 2;
  } catch (const std::filesystem::filesystem_error& e) {
    // A path the user gave that cannot be accessed (a symlink loop, no permission): bad input.
    const std::string path = e.path1().empty() ? std::string() : quoted(e.path1()) + ": ";
    report_misuse("cannot access " + one_line(path + e.code().message()));
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "shardwise: internal error: %s\n", one_line(e.what()).c_str());
    return 1;
  }
  return 0;
}

}  // namespace
