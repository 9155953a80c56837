#include "shardwise/train/synthetic_task.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "shardwise/core/error.hpp"

namespace shardwise {
namespace {

std::string text_of(const SyntheticTaskDataset& task, Split split, std::int64_t i) {
  return task.sample_text(split, i);
}

TEST(SyntheticTaskDataset, AdditionSamplesAreCorrectSums) {
  SyntheticTaskDataset task(SyntheticTaskKind::kAddition, 3, 42, 100);
  EXPECT_EQ(task.seq_len(), 12);
  for (int i = 0; i < 200; ++i) {
    const std::string s = text_of(task, Split::kTrain, i);
    ASSERT_EQ(s.size(), 13u) << s;
    const int a = std::stoi(s.substr(0, 3)), b = std::stoi(s.substr(4, 3));
    EXPECT_EQ(s[3], '+');
    EXPECT_EQ(s[7], '=');
    std::string reversed(s.rbegin() + 1, s.rbegin() + 5);  // 4 answer digits, back to normal order
    EXPECT_EQ(std::stoi(reversed), a + b) << s;
    EXPECT_EQ(s.back(), '.');
  }
}

TEST(SyntheticTaskDataset, OnlyAnswerTokensAreScored) {
  SyntheticTaskDataset task(SyntheticTaskKind::kAddition, 2, 1, 10);
  std::vector<std::int32_t> tokens(task.seq_len()), targets(task.seq_len());
  task.fill(Split::kTrain, 5, 1, tokens.data(), targets.data());
  // "ab+cd=" is 6 prompt chars: positions 0..4 predict prompt chars and are not scored.
  for (int t = 0; t < 5; ++t) EXPECT_EQ(targets[t], -1) << t;
  for (int t = 5; t < task.seq_len(); ++t) EXPECT_GE(targets[t], 0) << t;
  for (int t = 0; t + 1 < task.seq_len(); ++t) {
    if (targets[t] >= 0) {
      EXPECT_EQ(targets[t], tokens[t + 1]);
    }
  }
}

TEST(SyntheticTaskDataset, ValidationIsHeldOutFromTraining) {
  SyntheticTaskDataset task(SyntheticTaskKind::kAddition, 2, 3, 200);
  std::set<std::string> train, validation;
  for (int i = 0; i < 5000; ++i) train.insert(text_of(task, Split::kTrain, i).substr(0, 6));
  for (int i = 0; i < 200; ++i)
    validation.insert(text_of(task, Split::kValidation, i).substr(0, 6));
  for (const auto& v : validation) EXPECT_EQ(train.count(v), 0u) << v;
  EXPECT_GT(validation.size(), 50u);
}

TEST(SyntheticTaskDataset, DeterministicAndSeedDependent) {
  SyntheticTaskDataset a(SyntheticTaskKind::kSort, 6, 11, 10),
      b(SyntheticTaskKind::kSort, 6, 11, 10), c(SyntheticTaskKind::kSort, 6, 12, 10);
  int differ = 0;
  for (int i = 0; i < 50; ++i) {
    EXPECT_EQ(text_of(a, Split::kTrain, i), text_of(b, Split::kTrain, i));
    differ += text_of(a, Split::kTrain, i) != text_of(c, Split::kTrain, i);
    const std::string s = text_of(a, Split::kTrain, i);
    std::string sorted = s.substr(0, 6);
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(s.substr(7, 6), sorted);
  }
  EXPECT_GT(differ, 40);
}

TEST(SyntheticTaskDataset, RejectsBadDigits) {
  EXPECT_THROW(SyntheticTaskDataset(SyntheticTaskKind::kAddition, 0, 1, 1), InvalidArgument);
  EXPECT_THROW(SyntheticTaskDataset(SyntheticTaskKind::kAddition, 3, 1, 0), InvalidArgument);
}

}  // namespace
}  // namespace shardwise
