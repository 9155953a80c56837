#include "shardwise/train/token_file_dataset.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "scratch_dir.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise {
namespace {

namespace fs = std::filesystem;

class TokenFiles : public test::ScratchDirTest {
 protected:
  void write_bytes(const std::string& name, const std::string& bytes) const {
    write_all(dir_ / name, bytes);
  }
};

template <typename Fn>
std::string error_of(Fn&& fn) {
  return test::error_message_of(std::forward<Fn>(fn));
}

// Data that is not a regular file is refused before it is opened: /dev/zero would be read
// forever, opening a FIFO blocks until a writer comes, and a directory reads as empty.
TEST_F(TokenFiles, NonRegularFilesAreRefusedNamingWhatTheyAre) {
  fs::create_directories(dir_ / "a_directory");
  ASSERT_EQ(::mkfifo(path("a_fifo").c_str(), 0600), 0);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {path("a_directory"), "is a directory"},
      {path("a_fifo"), "is a FIFO (named pipe)"},
      {"/dev/zero", "is a character device"},
      {path("missing"), "does not exist"}};
  for (const auto& [file, why] : cases) {
    for (auto reader : {read_text_tokens, read_bin_tokens}) {
      const std::string m = error_of([&] { reader(file); });
      EXPECT_NE(m.find(str_cat("data file '", file, "' ", why)), std::string::npos) << m;
    }
  }
}

TEST_F(TokenFiles, TextIsByteLevel) {
  write_bytes("a.txt", "Hi\xff!");
  EXPECT_EQ(read_text_tokens(path("a.txt")), (std::vector<std::int32_t>{'H', 'i', 255, '!'}));
}

TEST_F(TokenFiles, BinRoundTripsInTheLlmCLayout) {
  const std::vector<std::uint16_t> tokens = {0, 1, 65535, 42, 7};
  write_bin_tokens(path("t.bin"), tokens);
  EXPECT_EQ(fs::file_size(path("t.bin")), 256 * 4 + tokens.size() * 2);
  // Header by hand: magic 20240520, version 1, token count.
  std::ifstream in(path("t.bin"), std::ios::binary);
  std::int32_t header[3];
  in.read(reinterpret_cast<char*>(header), sizeof header);
  EXPECT_EQ(header[0], 20240520);
  EXPECT_EQ(header[1], 1);
  EXPECT_EQ(header[2], 5);
  EXPECT_EQ(read_bin_tokens(path("t.bin")), (std::vector<std::int32_t>{0, 1, 65535, 42, 7}));
}

TEST_F(TokenFiles, BadBinFilesNameTheFileAndTheProblem) {
  write_bin_tokens(path("good.bin"), {1, 2, 3, 4});
  std::string bytes;
  {
    std::ifstream in(path("good.bin"), std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  write_bytes("short.bin", bytes.substr(0, 100));
  EXPECT_NE(error_of([&] { read_bin_tokens(path("short.bin")); }).find("shorter than its"),
            std::string::npos);
  write_bytes("truncated.bin", bytes.substr(0, bytes.size() - 3));
  const std::string truncated = error_of([&] { read_bin_tokens(path("truncated.bin")); });
  EXPECT_NE(truncated.find("truncated"), std::string::npos) << truncated;
  EXPECT_NE(truncated.find("truncated.bin"), std::string::npos) << truncated;
  std::string bad_magic = bytes;
  bad_magic[0] = 'X';
  write_bytes("magic.bin", bad_magic);
  EXPECT_NE(error_of([&] { read_bin_tokens(path("magic.bin")); }).find("bad magic"),
            std::string::npos);
  write_bytes("trailing.bin", bytes + "zz");
  EXPECT_NE(error_of([&] { read_bin_tokens(path("trailing.bin")); }).find("trailing"),
            std::string::npos);
  EXPECT_THROW(read_bin_tokens(path("missing.bin")), IoError);
}

TEST_F(TokenFiles, DatasetDrawsWindowsWithNextTokenTargets) {
  std::vector<std::int32_t> train(200), val;
  for (int i = 0; i < 200; ++i) train[i] = i % 50;
  TokenFileDataset data(train, val, 8, 0, 7, 4, "test tokens");
  EXPECT_EQ(data.vocab_size(), 50);  // 1 + largest token
  std::vector<std::int32_t> tokens(3 * 8), targets(3 * 8);
  for (Split split : {Split::kTrain, Split::kValidation}) {
    data.fill(split, 10, 3, tokens.data(), targets.data());
    for (int s = 0; s < 3; ++s) {
      for (int t = 0; t < 8; ++t) {
        const auto i = static_cast<std::size_t>(s * 8 + t);
        EXPECT_EQ(targets[i], (tokens[i] + 1) % 50);  // the corpus counts up modulo 50
      }
    }
  }
  std::vector<std::int32_t> again(3 * 8), again_targets(3 * 8);
  data.fill(Split::kTrain, 10, 3, again.data(), again_targets.data());
  data.fill(Split::kTrain, 10, 3, tokens.data(), targets.data());
  EXPECT_EQ(again, tokens) << "samples are a function of their index";
}

// Validation sample i starts at token i * seq_len: past the part's whole samples, evaluation
// wraps around and scores tokens twice, which the user hears about (it was silent).
TEST_F(TokenFiles, MoreEvalSamplesThanTheValidationPartHoldsIsWarned) {
  std::vector<std::int32_t> train(200, 1), val(41, 2);  // 40 targets: 5 samples of 8
  EXPECT_TRUE(TokenFileDataset(train, val, 8, 0, 7, 5, "t").warnings().empty());
  const std::vector<std::string> given = TokenFileDataset(train, val, 8, 0, 7, 6, "t").warnings();
  ASSERT_EQ(given.size(), 1u);
  EXPECT_EQ(given[0],
            "data.eval_samples (6) is more than the 5 samples of 8 tokens in data.val_path's file: "
            "evaluation wraps around and scores held-out tokens more than once (the held-out loss "
            "is no better measured than with 5)");
  // Held out: the last tenth of 200 tokens is 20, two samples of 8.
  const std::vector<std::string> held =
      TokenFileDataset(train, {}, 8, 0, 7, 3, "text file 'corpus.txt'").warnings();
  ASSERT_EQ(held.size(), 1u);
  EXPECT_NE(held[0].find("the 2 samples of 8 tokens in the held-out last tenth of text file "
                         "'corpus.txt'"),
            std::string::npos)
      << held[0];
}

// Ranks compare fingerprints at startup: one token moved, swapped or added must change it.
TEST_F(TokenFiles, FingerprintFollowsEveryToken) {
  std::vector<std::int32_t> train(203);
  for (int i = 0; i < 203; ++i) train[i] = i % 50;
  auto fingerprint = [](std::vector<std::int32_t> tokens) {
    return TokenFileDataset(std::move(tokens), {}, 8, 0, 7, 4, "t").fingerprint();
  };
  const std::uint64_t base = fingerprint(train);
  EXPECT_EQ(fingerprint(train), base);
  for (const std::size_t at : {std::size_t{0}, std::size_t{101}, std::size_t{202}}) {
    std::vector<std::int32_t> changed = train;
    changed[at] = (changed[at] + 1) % 50;
    EXPECT_NE(fingerprint(changed), base) << "token " << at;
  }
  std::vector<std::int32_t> swapped = train;
  std::swap(swapped[10], swapped[12]);  // the same lane
  EXPECT_NE(fingerprint(swapped), base);
  std::vector<std::int32_t> longer = train;
  longer.push_back(0);
  EXPECT_NE(fingerprint(longer), base);
}

TEST_F(TokenFiles, TooFewTokensOrOutOfVocabularyAreErrors) {
  EXPECT_THROW(TokenFileDataset({1, 2, 3}, {}, 8, 0, 1, 1, "tiny"), InvalidArgument);
  std::vector<std::int32_t> train(100, 3);
  train[5] = 300;
  EXPECT_THROW(TokenFileDataset(train, {}, 8, 256, 1, 1, "oov"), FormatError);
  // A given vocabulary is model.vocab: the message names it and what would fit.
  train[7] = 411;
  EXPECT_EQ(test::error_message_of([&] { TokenFileDataset(train, {}, 8, 256, 1, 1, "oov"); }),
            "oov: token 300 outside the vocabulary of 256 (model.vocab; give at least 412, or 0 "
            "to take it from the data)");
}

}  // namespace
}  // namespace shardwise
