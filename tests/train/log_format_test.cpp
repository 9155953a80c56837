#include "shardwise/train/log_format.hpp"

#include <gtest/gtest.h>

namespace shardwise {
namespace {

TEST(LogFormat, CommHiddenAsAPercentage) {
  EXPECT_EQ(comm_hidden_text(0.66), "comm hidden 66%");
  EXPECT_EQ(comm_hidden_text(0.0), "comm hidden 0%");
  EXPECT_EQ(comm_hidden_text(1.0), "comm hidden 100%");
  EXPECT_EQ(comm_hidden_text(0.996), "comm hidden 100%");
}

TEST(LogFormat, ExactMatchOnlyForTasksWithExactAnswers) {
  DataConfig addition;
  EXPECT_TRUE(reports_exact_match(addition));
  EXPECT_EQ(exact_match_text(addition, 0.5), ", exact-match accuracy 50%");
  for (DataSource source : {DataSource::kText, DataSource::kBin}) {
    DataConfig text;
    text.source = source;
    text.path = "corpus";
    EXPECT_FALSE(reports_exact_match(text));
    EXPECT_EQ(exact_match_text(text, 0.5), "");
  }
}

}  // namespace
}  // namespace shardwise
