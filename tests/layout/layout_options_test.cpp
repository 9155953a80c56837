#include "shardwise/layout/layout_options.hpp"

#include <gtest/gtest.h>

#include "shardwise/core/error.hpp"

namespace shardwise {
namespace {

void expect_invalid(const LayoutOptions& options, const std::string& field) {
  try {
    options.validate();
    ADD_FAILURE() << "no error for " << field;
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
  }
}

TEST(LayoutOptions, ValidateNamesTheField) {
  LayoutOptions ok;
  ok.data_parallel_size = 8;
  ok.bucket_size = 1;
  EXPECT_NO_THROW(ok.validate());
  EXPECT_EQ(ok.expert_dp(), 8);
  ok.expert_data_parallel_size = 2;
  EXPECT_EQ(ok.expert_dp(), 2);

  LayoutOptions bad_dp;
  bad_dp.data_parallel_size = 0;
  expect_invalid(bad_dp, "data_parallel_size");
  LayoutOptions bad_expert;
  bad_expert.expert_data_parallel_size = 0;
  expect_invalid(bad_expert, "expert_data_parallel_size");
  LayoutOptions bad_bucket;
  bad_bucket.bucket_size = 0;
  expect_invalid(bad_bucket, "bucket_size");
  bad_bucket.bucket_size = -5;
  expect_invalid(bad_bucket, "bucket_size");
}

}  // namespace
}  // namespace shardwise
