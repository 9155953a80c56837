// The --save root lock: one job at a time per root (flock, so a crashed holder never leaves a
// stale lock), the owner named in the refusal, and leftovers of killed saves removed by the next
// job that takes the lock - and nothing else removed.
#include "shardwise/checkpoint/checkpoint_root_lock.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <optional>

#include "scratch_dir.hpp"

namespace shardwise {
namespace {

namespace fs = std::filesystem;
using test::error_message_of;

class CheckpointRootLockTest : public test::ScratchDirTest {};

TEST_F(CheckpointRootLockTest, SecondHolderIsRefusedNamingTheOwnerUntilTheFirstReleases) {
  const fs::path root = dir_ / "ckpt";
  std::optional<CheckpointRootLock> first;
  first.emplace(root);  // creates the root
  EXPECT_TRUE(fs::is_directory(root));
  const std::string message = error_message_of([&] { CheckpointRootLock second(root); });
  EXPECT_NE(message.find("is in use by another job"), std::string::npos) << message;
  EXPECT_NE(message.find(str_cat("pid ", ::getpid())), std::string::npos) << message;
  EXPECT_NE(message.find(root.string()), std::string::npos) << message;
  first.reset();
  EXPECT_EQ(error_message_of([&] { CheckpointRootLock again(root); }), "(no error)");
}

TEST_F(CheckpointRootLockTest, LockOfAProcessThatDiedIsFree) {
  const fs::path root = dir_ / "ckpt";
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    CheckpointRootLock lock(root);
    ::write(ready[1], "x", 1) == 1 ? ::_exit(0) : ::_exit(1);  // exits holding the lock
  }
  char byte;
  ASSERT_EQ(::read(ready[0], &byte, 1), 1);
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_EQ(error_message_of([&] { CheckpointRootLock lock(root); }), "(no error)");
  ::close(ready[0]);
  ::close(ready[1]);
}

TEST_F(CheckpointRootLockTest, TakingTheLockRemovesLeftoversOfKilledSavesOnly) {
  const fs::path root = dir_ / "ckpt";
  fs::create_directories(root / ".step-0000005.staging.123.abcd.0");
  write_all(root / ".step-0000005.staging.123.abcd.0" / "model.safetensors", "partial");
  fs::create_directories(root / ".step-0000002.pruned");
  write_all(root / ".latest.tmp.123.abcd.1", "step-0000004");
  fs::create_directories(root / "step-0000004");
  write_all(root / "step-0000004" / "checkpoint.json", "{}");
  write_all(root / "latest", "step-0000004\n");
  write_all(root / ".notes", "the user's own hidden file");
  CheckpointRootLock lock(root);
  EXPECT_EQ(lock.removed_leftovers(), 3);
  EXPECT_FALSE(fs::exists(root / ".step-0000005.staging.123.abcd.0"));
  EXPECT_FALSE(fs::exists(root / ".step-0000002.pruned"));
  EXPECT_FALSE(fs::exists(root / ".latest.tmp.123.abcd.1"));
  EXPECT_TRUE(fs::exists(root / "step-0000004" / "checkpoint.json"));
  EXPECT_EQ(read_all(root / "latest"), "step-0000004\n");
  EXPECT_TRUE(fs::exists(root / ".notes"));
}

TEST(CheckpointRootEntries, AreThePointerTheLockStepsAndLeftovers) {
  for (const char* name :
       {"latest", ".lock", "step-0000002", "step-12345678901", ".step-0000002.staging.41.ab.0",
        ".step-0000002.pruned", ".latest.tmp.x1"}) {
    EXPECT_TRUE(is_checkpoint_root_entry(name)) << name;
  }
  for (const char* name : {"m.jsonl", "loss.svg", "step-", "step-12a", "latest.bak", ".locks",
                           "steps", "config.yaml"}) {
    EXPECT_FALSE(is_checkpoint_root_entry(name)) << name;
  }
}

TEST_F(CheckpointRootLockTest, RootThatIsAFileIsAnError) {
  write_all(dir_ / "file", "x");
  const std::string message = error_message_of([&] { CheckpointRootLock lock(dir_ / "file"); });
  EXPECT_NE(message.find("cannot be created"), std::string::npos) << message;
}

}  // namespace
}  // namespace shardwise
