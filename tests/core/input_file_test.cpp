// Every file the project reads is a regular file of a plausible size: a FIFO, a device, a
// directory or a symlink to one is refused at once (a FIFO without a writer used to block the
// reader forever, /dev/zero was read until bad_alloc), naming the file and what it is.
#include "shardwise/core/input_file.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "scratch_dir.hpp"
#include "shardwise/core/atomic_file.hpp"

namespace shardwise {
namespace {

namespace fs = std::filesystem;
using test::error_message_of;

#define EXPECT_MESSAGE_HAS(text, part) \
  EXPECT_NE((text).find(part), std::string::npos) << "message: " << (text)

class InputFileTest : public test::ScratchDirTest {};

TEST_F(InputFileTest, RegularFilesAreReadWhole) {
  const std::string bytes("a\0b\nc", 5);
  write_all(dir_ / "f", bytes);
  EXPECT_EQ(read_input_file(dir_ / "f", "spec", 5), bytes);
  fs::create_symlink(dir_ / "f", dir_ / "link");
  EXPECT_EQ(read_input_file(dir_ / "link", "spec", 100), bytes);
  const InputFile file = InputFile::open(dir_ / "f", "spec", 100);
  EXPECT_EQ(file.size(), 5u);
  EXPECT_GE(file.fd(), 0);
  write_all(dir_ / "empty", "");
  EXPECT_EQ(read_input_file(dir_ / "empty", "spec", 0), "");
}

TEST_F(InputFileTest, NonRegularFilesAreRefusedNamingWhatTheyAre) {
  ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0600), 0);
  fs::create_symlink(dir_ / "fifo", dir_ / "to_fifo");
  fs::create_symlink("/dev/zero", dir_ / "to_zero");
  fs::create_directories(dir_ / "a_dir");
  fs::create_symlink(dir_ / "loop_b", dir_ / "loop_a");
  fs::create_symlink(dir_ / "loop_a", dir_ / "loop_b");
  const std::vector<std::pair<fs::path, std::string>> cases = {
      {dir_ / "fifo", "is a FIFO (named pipe), not a regular file"},
      {dir_ / "to_fifo", "is a FIFO (named pipe), not a regular file"},
      {dir_ / "to_zero", "is a character device, not a regular file"},
      {"/dev/null", "is a character device, not a regular file"},
      {dir_ / "a_dir", "is a directory, not a regular file"},
      {dir_ / "missing", "does not exist"},
      {dir_ / "loop_a", "Too many levels of symbolic links"},
  };
  for (const auto& [file, why] : cases) {
    // Returns at once (a FIFO without a writer must not block), naming the file and its role.
    const std::string m = error_message_of([&] { read_input_file(file, "model spec", 1 << 20); });
    EXPECT_MESSAGE_HAS(m, "model spec '" + file.string() + "'");
    EXPECT_MESSAGE_HAS(m, why);
  }
}

TEST_F(InputFileTest, FilesOverTheLimitAreRefused) {
  write_all(dir_ / "big", std::string(4097, 'x'));
  const std::string m =
      error_message_of([&] { read_input_file(dir_ / "big", "pointer file", 4096); });
  EXPECT_MESSAGE_HAS(m, "pointer file '" + (dir_ / "big").string() + "' is 4097 bytes");
  EXPECT_MESSAGE_HAS(m, "limit 4096 bytes");
  EXPECT_EQ(read_input_file(dir_ / "big", "pointer file", 4097).size(), 4097u);
}

TEST_F(InputFileTest, PointerFileThatIsAFifoOrHugeIsRefused) {
  EXPECT_EQ(read_pointer_file(dir_ / "latest"), std::nullopt);  // missing: no pointer
  ASSERT_EQ(::mkfifo(path("latest").c_str(), 0600), 0);
  EXPECT_MESSAGE_HAS(error_message_of([&] { read_pointer_file(dir_ / "latest"); }),
                     "is a FIFO (named pipe)");
  fs::remove(dir_ / "latest");
  fs::create_symlink("/dev/zero", dir_ / "latest");
  EXPECT_MESSAGE_HAS(error_message_of([&] { read_pointer_file(dir_ / "latest"); }),
                     "is a character device");
  fs::remove(dir_ / "latest");
  write_all(dir_ / "latest", std::string(kPointerFileMaxBytes + 1, 's'));
  EXPECT_MESSAGE_HAS(error_message_of([&] { read_pointer_file(dir_ / "latest"); }),
                     "bytes, more than any pointer file");
  write_all(dir_ / "latest", " step-0000004\n");
  EXPECT_EQ(read_pointer_file(dir_ / "latest"), "step-0000004");
}

}  // namespace
}  // namespace shardwise
