// Launching test_comm_mpi under `mpirun -np N` from a single-process test, for behaviour that
// ends a job (aborts, the watchdog): the child's test cases check an environment variable so they
// only run when launched this way.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace shardwise::testing_comm {

inline std::string find_on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return {};
  std::string dirs = path;
  std::size_t start = 0;
  while (start <= dirs.size()) {
    const std::size_t end = std::min(dirs.find(':', start), dirs.size());
    const std::filesystem::path candidate =
        std::filesystem::path(dirs.substr(start, end - start)) / name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate.string();
    start = end + 1;
  }
  return {};
}

struct ChildJob {
  bool available = false;  // mpirun and test_comm_mpi found
  std::string why_not;
  int exit_code = -1;      // -1 when the job did not exit normally
  std::string output;      // stdout and stderr of every rank
};

// Runs `test_comm_mpi --gtest_filter=<filter>` (built next to this binary) on `ranks` ranks with
// `env` (e.g. "FOO=1") added to a clean environment, killed after `limit_seconds`.
inline ChildJob run_mpi_child(int ranks, const std::string& filter, const std::string& env,
                              int limit_seconds) {
  ChildJob job;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe");
  const std::filesystem::path child = self.parent_path() / "test_comm_mpi";
  const std::string mpirun = find_on_path("mpirun");
  if (mpirun.empty() || !std::filesystem::exists(child)) {
    job.why_not = "needs mpirun on PATH and " + child.string();
    return job;
  }
  job.available = true;
  // A clean environment: this process may itself be an Open MPI singleton whose variables would
  // confuse the child job. Leak checking is off in the child: aborted ranks exit mid-flight.
  const std::string command =
      "env -i PATH='" + std::string(std::getenv("PATH")) +
      "' HOME=/tmp OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "
      "OMPI_MCA_rmaps_base_oversubscribe=1 ASAN_OPTIONS=detect_leaks=0 " +
      env + " timeout " + std::to_string(limit_seconds) + " '" + mpirun + "' -np " +
      std::to_string(ranks) + " --oversubscribe '" + child.string() + "' --gtest_filter='" +
      filter + "' 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) {
    job.why_not = "popen failed";
    job.available = false;
    return job;
  }
  std::array<char, 4096> chunk;
  while (std::fgets(chunk.data(), static_cast<int>(chunk.size()), pipe) != nullptr) {
    job.output += chunk.data();
  }
  const int status = ::pclose(pipe);
  if (WIFEXITED(status)) job.exit_code = WEXITSTATUS(status);
  return job;
}

}  // namespace shardwise::testing_comm
