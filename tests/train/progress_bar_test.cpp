// Rank 0's progress bar with a test clock: redraws are limited to kMaxRedrawsPerSecond however
// many steps arrive, the final state is always drawn, and a line printed in between never follows
// a stale or half-finished bar.
#include "../../src/train/progress_bar.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>

namespace shardwise::train_detail {
namespace {

using std::chrono::milliseconds;
using TimePoint = std::chrono::steady_clock::time_point;

// Everything written to a temporary FILE*, read back as one string.
std::string bar_output(std::FILE* file) {
  std::fflush(file);
  std::rewind(file);
  std::string text;
  for (int c; (c = std::fgetc(file)) != EOF;) text.push_back(static_cast<char>(c));
  return text;
}

std::size_t bar_char_count(const std::string& text, char c) {
  return static_cast<std::size_t>(std::count(text.begin(), text.end(), c));
}

class ProgressBarTest : public testing::Test {
 protected:
  void SetUp() override {
    file_ = std::tmpfile();
    ASSERT_NE(file_, nullptr);
  }
  void TearDown() override { std::fclose(file_); }
  ProgressBar::Clock clock() {
    return [this] { return TimePoint{} + now_; };
  }
  std::FILE* file_ = nullptr;
  milliseconds now_{1'000'000};
};

TEST_F(ProgressBarTest, ManyFastStepsRedrawAFewTimesPerSecondPlusTheEnd) {
  ProgressBar bar(1000, true, file_, clock());
  for (int step = 1; step <= 1000; ++step) {
    now_ += milliseconds(1);  // 1000 steps in one second
    bar.update(step, "loss 1");
  }
  // Drawn at steps 1, 251, 501 and 751 (every 250 ms) and the final state.
  EXPECT_EQ(bar.redraws(), 5);
  const std::string text = bar_output(file_);
  EXPECT_EQ(bar_char_count(text, '\r'), 5u) << text;
  EXPECT_EQ(bar_char_count(text, '\n'), 1u) << text;
  EXPECT_NE(text.find("\r[##############################] 1000/1000 loss 1\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("] 251/1000 "), std::string::npos) << text;
  EXPECT_EQ(text.find("] 250/1000 "), std::string::npos) << text;
}

TEST_F(ProgressBarTest, SlowStepsAreEachDrawn) {
  ProgressBar bar(4, true, file_, clock());
  for (int step = 1; step <= 4; ++step) {
    now_ += milliseconds(300);
    bar.update(step, "s");
  }
  EXPECT_EQ(bar.redraws(), 4);
}

TEST_F(ProgressBarTest, EndLineDrawsTheLatestStateOnceAndNeverPrintsABlankLine) {
  ProgressBar bar(10, true, file_, clock());
  bar.update(1, "a");
  now_ += milliseconds(10);
  bar.update(2, "b");  // too soon after the first redraw: pending
  bar.end_line();      // e.g. an eval line follows: step 2 is shown first
  bar.end_line();      // nothing on screen: no second newline
  const std::string text = bar_output(file_);
  EXPECT_EQ(text,
            "\r[###...........................] 1/10 a"
            "\r[######........................] 2/10 b\n");
}

TEST_F(ProgressBarTest, DisabledWritesNothing) {
  ProgressBar bar(3, false, file_, clock());
  for (int step = 1; step <= 3; ++step) bar.update(step, "x");
  bar.end_line();
  EXPECT_EQ(bar.redraws(), 0);
  EXPECT_EQ(bar_output(file_), "");
}

}  // namespace
}  // namespace shardwise::train_detail
