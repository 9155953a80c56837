// run_rank_main across ranks: launches test_comm_mpi under `mpirun -np 2` with only its
// RunRankMainChild test enabled, in which rank 1 throws while rank 0 waits in a barrier. The job
// must end with exit code 2 and the error on stderr, not hang. Skips when mpirun or the MPI test
// binary (built next to this one) is missing.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace {

std::string find_on_path(const std::string& name) {
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

TEST(RunRankMain, AnExceptionOnOneRankAbortsTheJobWithExitCode2) {
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe");
  const std::filesystem::path child = self.parent_path() / "test_comm_mpi";
  const std::string mpirun = find_on_path("mpirun");
  if (mpirun.empty() || !std::filesystem::exists(child)) {
    GTEST_SKIP() << "needs mpirun on PATH and " << child;
  }
  // A clean environment: this process may itself be an Open MPI singleton whose variables would
  // confuse the child job. Leak checking is off in the child: aborted ranks exit mid-flight.
  const std::string command =
      "env -i PATH='" + std::string(std::getenv("PATH")) +
      "' HOME=/tmp OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "
      "OMPI_MCA_rmaps_base_oversubscribe=1 ASAN_OPTIONS=detect_leaks=0 "
      "SHARDWISE_COMM_ABORT_CHILD=1 timeout 120 '" +
      mpirun + "' -np 2 --oversubscribe '" + child.string() +
      "' --gtest_filter=RunRankMainChild.* 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  std::array<char, 4096> chunk;
  while (std::fgets(chunk.data(), static_cast<int>(chunk.size()), pipe) != nullptr) {
    output += chunk.data();
  }
  const int status = ::pclose(pipe);
  ASSERT_TRUE(WIFEXITED(status)) << output;
  EXPECT_EQ(WEXITSTATUS(status), 2) << output;  // 124 would mean the job hung until timeout
  EXPECT_NE(output.find("[rank 1/2] shardwise: error: rank 1 failed on purpose: bad field `lr`"),
            std::string::npos)
      << output;
  EXPECT_EQ(output.find("survived the abort"), std::string::npos) << output;
}

}  // namespace
