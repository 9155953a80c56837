// Output handling of the trainer: preflight of output paths (missing directory, a directory as
// the file, a full filesystem, a read-only mount) and the JSONL metrics log that reports a failed
// write instead of truncating silently.
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cmath>
#include <fstream>

#include "scratch_dir.hpp"
#include "shardwise/core/output_preflight.hpp"
#include "shardwise/train/metrics_log.hpp"

namespace shardwise {
namespace {

namespace fs = std::filesystem;
using test::error_message_of;

#define EXPECT_CONTAINS(text, part) \
  EXPECT_NE((text).find(part), std::string::npos) << "message: " << (text)

class OutputChecks : public test::ScratchDirTest {
 protected:
  // Mounts a tmpfs of `kib` KiB (options appended) at dir_/name; false when not permitted here.
  bool mount_tmpfs(const std::string& name, int kib, const std::string& extra = "") {
    const fs::path at = dir_ / name;
    fs::create_directories(at);
    const std::string options = str_cat("size=", kib, "k", extra);
    if (::mount("tmpfs", at.c_str(), "tmpfs", 0, options.c_str()) != 0) return false;
    mounts_.push_back(at);
    return true;
  }
  void TearDown() override {
    for (const auto& m : mounts_) ::umount2(m.c_str(), MNT_DETACH);
    ScratchDirTest::TearDown();
  }
  std::vector<fs::path> mounts_;
};

TEST_F(OutputChecks, MissingDirectoryAndDirectoryAsFileAreRefusedNamingTheOption) {
  std::string m =
      error_message_of([&] { preflight_output_file(dir_ / "no" / "m.jsonl", "--log-jsonl"); });
  EXPECT_CONTAINS(m, "--log-jsonl '" + (dir_ / "no" / "m.jsonl").string() + "' is not writable");
  EXPECT_CONTAINS(m, "does not exist");
  m = error_message_of([&] { preflight_output_file(dir_, "--plot"); });
  EXPECT_CONTAINS(m, "--plot '" + dir_.string() + "' is not writable: it is a directory");
  write_all(dir_ / "file", "x");
  m = error_message_of([&] { preflight_output_directory(dir_ / "file" / "sub", "--save"); });
  EXPECT_CONTAINS(m, "--save '");
}

TEST_F(OutputChecks, UsablePathsPassAndLeaveNoTrace) {
  EXPECT_EQ(error_message_of([&] { preflight_output_file(dir_ / "m.jsonl", "--log-jsonl"); }),
            "(no error)");
  EXPECT_EQ(error_message_of([&] { preflight_output_directory(dir_ / "a" / "b", "--save"); }),
            "(no error)");
  EXPECT_TRUE(fs::is_directory(dir_ / "a" / "b"));
  EXPECT_TRUE(fs::is_empty(dir_ / "a" / "b"));
  EXPECT_FALSE(fs::exists(dir_ / "m.jsonl"));
  write_all(dir_ / "kept", "old content");
  EXPECT_EQ(error_message_of([&] { preflight_output_file(dir_ / "kept", "--plot"); }),
            "(no error)");
  EXPECT_EQ(read_all(dir_ / "kept"), "old content");
  // An output must be a regular file or not exist: the writers rename over it, which turned
  // /dev/null into a regular file when run as root.
  EXPECT_CONTAINS(error_message_of([&] { preflight_output_file("/dev/null", "--log-jsonl"); }),
                  "--log-jsonl '/dev/null' is not writable: it is a character device");
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
}

TEST_F(OutputChecks, FullAndReadOnlyFilesystemsAreRefused) {
  if (!mount_tmpfs("full", 64) || !mount_tmpfs("ro", 64, ",ro")) {
    GTEST_SKIP() << "cannot mount a tmpfs here (needs CAP_SYS_ADMIN): full/read-only filesystem "
                    "cases not run";
  }
  {  // fill it up
    std::ofstream fill(dir_ / "full" / "filler", std::ios::binary);
    const std::string block(4096, 'x');
    for (int i = 0; i < 64 && fill; ++i) fill << block;
  }
  std::string m = error_message_of([&] { preflight_output_directory(dir_ / "full", "--save"); });
  EXPECT_CONTAINS(m, "No space left on device");
  m = error_message_of([&] { preflight_output_file(dir_ / "ro" / "m.jsonl", "--log-jsonl"); });
  EXPECT_CONTAINS(m, "Read-only file system");
  m = error_message_of([&] { preflight_output_directory(dir_ / "ro" / "ckpt", "--save"); });
  EXPECT_CONTAINS(m, "--save '");
}

TEST_F(OutputChecks, MetricsLogWritesWholeLinesAndReportsAFullDisk) {
  {
    MetricsLog log(path("m.jsonl"), true);
    log.write({{"step", 1}, {"loss", 2.5}});
    log.write({{"step", 2}, {"loss", NAN}});
    log.close();
  }
  EXPECT_EQ(read_all(path("m.jsonl")), "{\"step\":1,\"loss\":2.5}\n{\"step\":2,\"loss\":null}\n");
  {
    MetricsLog inactive(path("never.jsonl"), false);
    inactive.write({{"step", 1}});
  }
  EXPECT_FALSE(fs::exists(path("never.jsonl")));
  // /dev/full fails every write with ENOSPC, as a full disk does.
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  MetricsLog full("/dev/full", true);
  const std::string m = error_message_of([&] { full.write({{"step", 1}}); });
  EXPECT_CONTAINS(m, "cannot write metrics file '/dev/full': No space left on device");
}

}  // namespace
}  // namespace shardwise
