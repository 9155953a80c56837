// A command's outputs are checked against its inputs and each other before any work, comparing
// the files (hard links, symlinks, "./" and ".." spellings) rather than the strings, and each
// output must be a regular file or not exist.
#include "shardwise/core/command_paths.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "scratch_dir.hpp"
#include "shardwise/core/atomic_file.hpp"
#include "shardwise/core/output_preflight.hpp"

namespace shardwise {
namespace {

namespace fs = std::filesystem;
using test::error_message_of;

#define EXPECT_PATHS_MESSAGE(text, part) \
  EXPECT_NE((text).find(part), std::string::npos) << "message: " << (text)

class CommandPathsTest : public test::ScratchDirTest {
 protected:
  std::string check(const std::vector<CommandPath>& paths) {
    return error_message_of([&] { check_command_paths(paths); });
  }
};

TEST_F(CommandPathsTest, OutputThatIsAnInputIsRefusedHoweverItIsSpelt) {
  write_all(dir_ / "c.yaml", "config");
  fs::create_directories(dir_ / "sub");
  fs::create_symlink(dir_ / "c.yaml", dir_ / "link.yaml");
  fs::create_hard_link(dir_ / "c.yaml", dir_ / "hard.yaml");
  const fs::path input = dir_ / "c.yaml";
  for (const fs::path& out : {input, dir_ / "sub" / ".." / "c.yaml", dir_ / "link.yaml",
                              dir_ / "hard.yaml", dir_ / "." / "c.yaml"}) {
    const std::string m =
        check({{"--config", input, PathUse::kReadFile}, {"--log-jsonl", out, PathUse::kWriteFile}});
    EXPECT_PATHS_MESSAGE(m, "--log-jsonl '" + out.string() +
                                "' is the same file as the input "
                                "--config '" +
                                input.string() + "'");
  }
  EXPECT_EQ(read_all(input), "config");
}

TEST_F(CommandPathsTest, TwoOutputsOnOneFileAreRefusedEvenBeforeEitherExists) {
  const std::string m = check({{"--log-jsonl", dir_ / "x", PathUse::kWriteFile},
                               {"--plot", dir_ / "sub" / ".." / "x", PathUse::kWriteFile}});
  // sub does not exist: the comparison is of the resolved paths, not of the files.
  EXPECT_PATHS_MESSAGE(m, "are the same file: one output would overwrite the other");
  fs::create_directories(dir_ / "real");
  fs::create_directory_symlink(dir_ / "real", dir_ / "alias");
  EXPECT_PATHS_MESSAGE(check({{"--log-jsonl", dir_ / "real" / "m", PathUse::kWriteFile},
                              {"--plot", dir_ / "alias" / "m", PathUse::kWriteFile}}),
                       "are the same file");
  EXPECT_EQ(check({{"--log-jsonl", dir_ / "m.jsonl", PathUse::kWriteFile},
                   {"--plot", dir_ / "m.svg", PathUse::kWriteFile},
                   {"--save", dir_ / "ckpt", PathUse::kWriteIntoDirectory},
                   {"--config", "", PathUse::kReadFile}}),
            "(no error)");
  EXPECT_TRUE(fs::is_directory(dir_ / "ckpt"));
  EXPECT_FALSE(fs::exists(dir_ / "m.jsonl"));
}

TEST_F(CommandPathsTest, PathWithinResolvesSpellingsAndLinks) {
  fs::create_directories(dir_ / "root" / "step-0000001");
  fs::create_directory_symlink(dir_ / "root", dir_ / "alias");
  EXPECT_EQ(path_within(dir_ / "root" / "step-0000001" / "m", dir_ / "root"),
            fs::path("step-0000001/m"));
  EXPECT_EQ(path_within(dir_ / "alias" / "latest", dir_ / "root"), fs::path("latest"));
  EXPECT_EQ(path_within(dir_ / "root" / "sub" / ".." / "x", dir_ / "alias"), fs::path("x"));
  EXPECT_EQ(path_within(dir_ / "alias", dir_ / "root"), fs::path("."));
  EXPECT_EQ(path_within(dir_ / "rootx" / "a", dir_ / "root"), std::nullopt);
  EXPECT_EQ(path_within(dir_ / "root", dir_ / "root" / "step-0000001"), std::nullopt);
}

TEST_F(CommandPathsTest, TreesReadAndDirectoriesReplacedProtectWhatIsInside) {
  fs::create_directories(dir_ / "ckpt" / "step-0000004");
  write_all(dir_ / "ckpt" / "step-0000004" / "checkpoint.json", "{}");
  const fs::path step = dir_ / "ckpt" / "step-0000004";
  EXPECT_PATHS_MESSAGE(check({{"--load", step, PathUse::kReadTree},
                              {"--plot", step / "checkpoint.json", PathUse::kWriteFile}}),
                       "lies inside --load '" + step.string() + "', which is read");
  // Resuming in place: saving into the root the loaded step lies in, metrics next to it.
  EXPECT_EQ(check({{"--load", step, PathUse::kReadTree},
                   {"--save", dir_ / "ckpt", PathUse::kWriteIntoDirectory},
                   {"--log-jsonl", dir_ / "ckpt" / "m.jsonl", PathUse::kWriteFile}}),
            "(no error)");
  write_all(dir_ / "ckpt" / "model.safetensors", "w");
  EXPECT_PATHS_MESSAGE(
      check({{"--checkpoint", dir_ / "ckpt" / "model.safetensors", PathUse::kReadFile},
             {"--out", dir_ / "ckpt", PathUse::kReplaceDirectory}}),
      "lies inside --out '" + (dir_ / "ckpt").string() + "', which is replaced as a whole");
  write_all(dir_ / "file", "keep");
  EXPECT_PATHS_MESSAGE(check({{"--out", dir_ / "file", PathUse::kReplaceDirectory}}),
                       "--out '" + (dir_ / "file").string() +
                           "' is a regular file; it must be a directory or not exist");
  EXPECT_EQ(read_all(dir_ / "file"), "keep");
}

// Only a regular file or nothing may be an output: the writers rename over the path, which made
// /dev/null a regular file (as root). Checked on a FIFO, a symlink to one, a socket-free
// directory, and a device node of our own (mknod, root only) rather than the real /dev/null.
TEST_F(CommandPathsTest, OutputsThatAreNotRegularFilesAreRefusedAndLeftAlone) {
  ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0600), 0);
  fs::create_symlink(dir_ / "fifo", dir_ / "to_fifo");
  fs::create_directories(dir_ / "a_dir");
  std::vector<std::pair<fs::path, std::string>> cases = {
      {dir_ / "fifo", "it is a FIFO (named pipe); an output must be a regular file"},
      {dir_ / "to_fifo", "it is a FIFO (named pipe)"},
      {dir_ / "a_dir", "it is a directory"},
      {"/dev/null", "it is a character device"}};
  const bool made_device = ::mknod(path("null").c_str(), S_IFCHR | 0666, makedev(1, 3)) == 0;
  if (made_device) cases.push_back({dir_ / "null", "it is a character device"});
  for (const auto& [out, why] : cases) {
    const std::string m = check({{"--plot", out, PathUse::kWriteFile}});
    EXPECT_PATHS_MESSAGE(m, "--plot '" + out.string() + "' is not writable: " + why);
    if (out == "/dev/null") continue;  // the writer is tried on scratch paths only
    // The writer itself refuses as well (defence in depth), before any content is produced.
    bool produced = false;
    const std::string w =
        error_message_of([&] { write_file_atomic(out, [&](FileSink&) { produced = true; }); });
    EXPECT_PATHS_MESSAGE(w, "an output must be a regular file or not exist");
    EXPECT_FALSE(produced);
  }
  struct stat st {};
  ASSERT_EQ(::lstat(path("fifo").c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  if (made_device) {
    ASSERT_EQ(::lstat(path("null").c_str(), &st), 0);
    EXPECT_TRUE(S_ISCHR(st.st_mode));
  }
  EXPECT_EQ(std::vector<std::string>(), [&] {
    std::vector<std::string> temps;  // no temp file left behind
    for (const auto& e : fs::directory_iterator(dir_)) {
      if (e.path().filename().string().front() == '.') temps.push_back(e.path().filename());
    }
    return temps;
  }());
}

}  // namespace
}  // namespace shardwise
