#include "shardwise/core/atomic_file.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "scratch_dir.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise {
namespace {

namespace fs = std::filesystem;

class AtomicFileTest : public test::ScratchDirTest {
 protected:
  static std::vector<std::string> names_in(const fs::path& dir) {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename());
    std::sort(names.begin(), names.end());
    return names;
  }
};

TEST_F(AtomicFileTest, WritesNewFileAndLeavesNothingElse) {
  write_file_atomic(dir_ / "a.txt", "hello");
  EXPECT_EQ(read_all(dir_ / "a.txt"), "hello");
  EXPECT_EQ(names_in(dir_), std::vector<std::string>{"a.txt"});
  write_file_atomic(dir_ / "empty", "");
  EXPECT_TRUE(fs::exists(dir_ / "empty"));
  EXPECT_EQ(fs::file_size(dir_ / "empty"), 0u);
}

TEST_F(AtomicFileTest, ReplacesContentAndKeepsPermissions) {
  const fs::path path = dir_ / "cfg";
  write_file_atomic(path, "old content that is longer");
  ASSERT_EQ(::chmod(path.c_str(), 0640), 0);
  write_file_atomic(path, "new");
  EXPECT_EQ(read_all(path), "new");
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0640u);
}

TEST_F(AtomicFileTest, SinkProducesExactBytesForMixedWriteSizes) {
  // Small writes are buffered, large ones bypass the buffer: the order must survive both.
  std::mt19937 rng(11);
  std::string expected;
  write_file_atomic(dir_ / "mixed", [&](FileSink& sink) {
    for (int i = 0; i < 200; ++i) {
      const std::size_t size = (rng() % 4 == 0) ? (rng() % (3 << 20)) : (rng() % 5000);
      std::string chunk(size, static_cast<char>('a' + i % 26));
      if (!chunk.empty()) chunk[0] = static_cast<char>(i);
      sink.write(chunk);
      expected += chunk;
      EXPECT_EQ(sink.bytes_written(), expected.size());
    }
  });
  EXPECT_EQ(read_all(dir_ / "mixed"), expected);
}

TEST_F(AtomicFileTest, SinkWritesLargeRunsInPlace) {
  // Large runs are written with pwrite at the offset the sink tracks: every byte must land where
  // it belongs, after buffered bytes and before them.
  std::mt19937 rng(12);
  std::string expected;
  write_file_atomic(dir_ / "pieces", [&](FileSink& sink) {
    for (const std::size_t size : {std::size_t{3}, std::size_t{(8 << 20) * 3 + 5}, std::size_t{77},
                                   std::size_t{(8 << 20) + 1}, std::size_t{(16 << 20)}}) {
      std::string run(size, '\0');
      for (char& c : run) c = static_cast<char>(rng());
      sink.write(run);
      expected += run;
    }
    EXPECT_EQ(sink.bytes_written(), expected.size());
  });
  EXPECT_EQ(fs::file_size(dir_ / "pieces"), expected.size());
  EXPECT_TRUE(read_all(dir_ / "pieces") == expected);  // not printed: 57 MB
}

TEST_F(AtomicFileTest, ReservedSpaceDoesNotChangeTheFile) {
  // reserve() only allocates blocks: a file that ends up shorter than reserved has exactly the
  // bytes written, and one that ends up longer has them all too.
  write_file_atomic(dir_ / "short", [](FileSink& sink) {
    sink.reserve(std::uint64_t{4} << 20);
    sink.write("abc");
  });
  EXPECT_EQ(read_all(dir_ / "short"), "abc");
  const std::string run(3 << 20, 'x');
  write_file_atomic(dir_ / "long", [&](FileSink& sink) {
    sink.reserve(10);
    sink.write(run);
    sink.write("yz");
  });
  EXPECT_TRUE(read_all(dir_ / "long") == run + "yz");
  EXPECT_EQ(names_in(dir_), (std::vector<std::string>{"long", "short"}));
}

TEST_F(AtomicFileTest, ThrowingCallbackKeepsOldFileAndRemovesTemp) {
  const fs::path path = dir_ / "state";
  write_file_atomic(path, "old");
  const std::string big(5 << 20, 'x');  // larger than the sink buffer: really reaches the disk
  EXPECT_THROW(write_file_atomic(path,
                                 [&](FileSink& sink) {
                                   sink.write(big);
                                   sink.write("tail");
                                   throw std::runtime_error("disk full (simulated)");
                                 }),
               std::runtime_error);
  EXPECT_EQ(read_all(path), "old");
  EXPECT_EQ(names_in(dir_), std::vector<std::string>{"state"});

  // Same when the target did not exist before: nothing at all is left.
  EXPECT_THROW(write_file_atomic(dir_ / "fresh",
                                 [&](FileSink& sink) {
                                   sink.write(big);
                                   throw IoError("simulated");
                                 }),
               IoError);
  EXPECT_FALSE(fs::exists(dir_ / "fresh"));
  EXPECT_EQ(names_in(dir_), std::vector<std::string>{"state"});
}

TEST_F(AtomicFileTest, ConcurrentReaderSeesOnlyCompleteVersions) {
  const fs::path path = dir_ / "shared";
  const std::string a(1 << 20, 'a');
  const std::string b(2 << 20, 'b');
  write_file_atomic(path, a);
  std::atomic<bool> done{false};
  std::atomic<int> reads{0};
  std::atomic<int> torn{0};
  std::thread reader([&] {
    while (!done.load()) {
      const std::string got = read_all(path);
      if (got != a && got != b) ++torn;
      ++reads;
    }
  });
  for (int i = 0; i < 40; ++i) write_file_atomic(path, i % 2 ? a : b);
  done = true;
  reader.join();
  EXPECT_EQ(torn.load(), 0) << "of " << reads.load() << " reads";
  EXPECT_GT(reads.load(), 0);
  EXPECT_EQ(read_all(path), a);
  EXPECT_EQ(names_in(dir_), std::vector<std::string>{"shared"});
}

TEST_F(AtomicFileTest, MissingDirectoryIsAnIoErrorNamingThePath) {
  try {
    write_file_atomic(dir_ / "no_such_dir" / "f", "x");
    ADD_FAILURE() << "expected IoError";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("no_such_dir"), std::string::npos) << e.what();
  }
  EXPECT_THROW(write_file_atomic(dir_ / "", "x"), InvalidArgument);
}

TEST_F(AtomicFileTest, TargetThatIsADirectoryFailsCleanly) {
  fs::create_directory(dir_ / "d");
  EXPECT_THROW(write_file_atomic(dir_ / "d", "x"), IoError);
  EXPECT_TRUE(fs::is_directory(dir_ / "d"));
  EXPECT_EQ(names_in(dir_), std::vector<std::string>{"d"});
}

TEST_F(AtomicFileTest, SymlinkTargetIsFollowedAndTheLinkKept) {
  // A relative link, through a second link, into another directory; then one that dangles.
  fs::create_directory(dir_ / "real");
  write_file_atomic(dir_ / "real" / "out.json", "old");
  fs::create_symlink("real/out.json", dir_ / "hop");
  fs::create_symlink("hop", dir_ / "out.json");
  write_file_atomic(dir_ / "out.json", "new");
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(dir_ / "out.json")));
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(dir_ / "hop")));
  EXPECT_EQ(read_all(dir_ / "real" / "out.json"), "new");
  EXPECT_EQ(names_in(dir_ / "real"), std::vector<std::string>{"out.json"});  // no temp left

  fs::create_symlink(dir_ / "real" / "later.json", dir_ / "dangling");
  write_file_atomic(dir_ / "dangling", "made");
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(dir_ / "dangling")));
  EXPECT_EQ(read_all(dir_ / "real" / "later.json"), "made");

  // A link to a directory is refused like the directory; a loop is an IoError, not a hang.
  fs::create_directory_symlink("real", dir_ / "to_dir");
  EXPECT_THROW(write_file_atomic(dir_ / "to_dir", "x"), IoError);
  fs::create_symlink("loop_b", dir_ / "loop_a");
  fs::create_symlink("loop_a", dir_ / "loop_b");
  try {
    write_file_atomic(dir_ / "loop_a", "x");
    ADD_FAILURE() << "expected IoError";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("loop_a"), std::string::npos) << e.what();
  }
}

TEST_F(AtomicFileTest, PointerFileRoundTrip) {
  const fs::path latest = dir_ / "latest";
  EXPECT_EQ(read_pointer_file(latest), std::nullopt);
  replace_pointer_file(latest, "iter_0000100");
  EXPECT_EQ(read_all(latest), "iter_0000100\n");
  EXPECT_EQ(read_pointer_file(latest), "iter_0000100");
  replace_pointer_file(latest, "iter_0000200");
  EXPECT_EQ(read_pointer_file(latest), "iter_0000200");
  EXPECT_THROW(replace_pointer_file(latest, "a\nb"), InvalidArgument);
  EXPECT_EQ(read_pointer_file(latest), "iter_0000200");
  std::ofstream(dir_ / "hand_written") << "  step_7 \r\n";
  EXPECT_EQ(read_pointer_file(dir_ / "hand_written"), "step_7");
}

TEST_F(AtomicFileTest, CommitDirectoryMovesStagedContentIntoPlace) {
  const fs::path target = dir_ / "ckpt";
  const fs::path staged = create_temp_directory_next_to(target);
  EXPECT_EQ(staged.parent_path(), dir_);
  EXPECT_TRUE(fs::is_directory(staged));
  EXPECT_TRUE(fs::is_empty(staged));
  write_file_atomic(staged / "rank0.safetensors", "r0");
  fs::create_directory(staged / "sub");
  write_file_atomic(staged / "sub" / "index.json", "{}");
  commit_directory(staged, target);
  EXPECT_FALSE(fs::exists(staged));
  EXPECT_EQ(read_all(target / "rank0.safetensors"), "r0");
  EXPECT_EQ(read_all(target / "sub" / "index.json"), "{}");
  EXPECT_EQ(names_in(dir_), std::vector<std::string>{"ckpt"});
}

TEST_F(AtomicFileTest, CommitDirectoryRefusesOrSwapsAnExistingTarget) {
  const fs::path target = dir_ / "ckpt";
  fs::create_directory(target);
  write_file_atomic(target / "old", "old");

  const fs::path staged = create_temp_directory_next_to(target);
  write_file_atomic(staged / "new", "new");
  try {
    commit_directory(staged, target);
    ADD_FAILURE() << "expected IoError";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("already exists"), std::string::npos) << e.what();
  }
  EXPECT_EQ(read_all(target / "old"), "old");
  EXPECT_EQ(read_all(staged / "new"), "new");

  // An existing *empty* target is refused too (plain rename(2) would replace it silently).
  fs::create_directory(dir_ / "empty_target");
  const fs::path staged2 = create_temp_directory_next_to(dir_ / "empty_target");
  EXPECT_THROW(commit_directory(staged2, dir_ / "empty_target"), IoError);
  fs::remove(staged2);
  fs::remove(dir_ / "empty_target");

  // Replacing swaps the target out and removes it: only a directory may be replaced that way.
  ASSERT_EQ(::mkfifo((dir_ / "fifo").c_str(), 0600), 0);
  write_file_atomic(dir_ / "file", "keep");
  for (const char* name : {"fifo", "file"}) {
    try {
      commit_directory(staged, dir_ / name, /*replace_existing=*/true);
      ADD_FAILURE() << "replaced " << name;
    } catch (const IoError& e) {
      EXPECT_NE(std::string(e.what()).find("exists and is not a directory"), std::string::npos)
          << e.what();
    }
  }
  EXPECT_TRUE(fs::is_fifo(dir_ / "fifo"));
  EXPECT_EQ(read_all(dir_ / "file"), "keep");
  fs::remove(dir_ / "fifo");
  fs::remove(dir_ / "file");

  commit_directory(staged, target, /*replace_existing=*/true);
  EXPECT_EQ(names_in(target), std::vector<std::string>{"new"});
  EXPECT_EQ(names_in(dir_), std::vector<std::string>{"ckpt"});
}

TEST_F(AtomicFileTest, TempDirectoriesAreDistinct) {
  const fs::path a = create_temp_directory_next_to(dir_ / "x");
  const fs::path b = create_temp_directory_next_to(dir_ / "x");
  EXPECT_NE(a, b);
  EXPECT_THROW(create_temp_directory_next_to(dir_ / "missing_parent" / "x"), IoError);
  EXPECT_THROW(commit_directory(dir_ / "not_there", dir_ / "y"), IoError);
}

}  // namespace
}  // namespace shardwise
