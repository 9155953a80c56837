#include "shardwise/layout/padding.hpp"

#include <gtest/gtest.h>

#include "shardwise/core/error.hpp"

namespace shardwise {
namespace {

TEST(Padding, PadToDivisorIsIntegerCeil) {
  EXPECT_EQ(pad_to_divisor(0, 7), 0);
  EXPECT_EQ(pad_to_divisor(7, 7), 7);
  EXPECT_EQ(pad_to_divisor(8, 7), 14);
  EXPECT_EQ(pad_to_divisor(1, 1), 1);
  EXPECT_EQ(pad_to_divisor((1LL << 40) + 1, 1LL << 20), (1LL << 40) + (1LL << 20));
  EXPECT_THROW(pad_to_divisor(5, 0), InvalidArgument);
  EXPECT_THROW(pad_to_divisor(-1, 4), InvalidArgument);
}

TEST(Padding, ParamStartAlignsTo64) {
  EXPECT_EQ(pad_param_start(0), 0);
  EXPECT_EQ(pad_param_start(1), 64);
  EXPECT_EQ(pad_param_start(64), 64);
  EXPECT_EQ(pad_param_start(65), 128);
  EXPECT_EQ(pad_param_start(10056), 10112);
}

TEST(Padding, BucketEndDivisor) {
  EXPECT_EQ(bucket_end_divisor(1, false), 128);
  EXPECT_EQ(bucket_end_divisor(4, false), 128);
  EXPECT_EQ(bucket_end_divisor(3, false), 384);
  EXPECT_EQ(bucket_end_divisor(6, false), 384);
  EXPECT_EQ(bucket_end_divisor(256, false), 256);
  EXPECT_EQ(bucket_end_divisor(4, true), 65536);
  EXPECT_EQ(bucket_end_divisor(3, true), 196608);
  EXPECT_EQ(bucket_end_divisor(1 << 17, true), 1 << 17);
  EXPECT_THROW(bucket_end_divisor(0, false), InvalidArgument);
}

TEST(Padding, PadBucketEnd) {
  EXPECT_EQ(pad_bucket_end(1, 4, false), 128);
  EXPECT_EQ(pad_bucket_end(1, 4, true), 65536);
  EXPECT_EQ(pad_bucket_end(1, 3, false), 384);
  EXPECT_EQ(pad_bucket_end(384, 3, false), 384);
  EXPECT_EQ(pad_bucket_end(10056, 2, false), 10112);
  EXPECT_EQ(pad_bucket_end(15112, 2, false), 15232);
}

TEST(Padding, LayerWiseShardDivisor) {
  // lcm(64, bucket_end_divisor / dp).
  EXPECT_EQ(layer_wise_shard_divisor(1, false), 128);
  EXPECT_EQ(layer_wise_shard_divisor(2, false), 64);
  EXPECT_EQ(layer_wise_shard_divisor(3, false), 128);
  EXPECT_EQ(layer_wise_shard_divisor(4, false), 64);
  EXPECT_EQ(layer_wise_shard_divisor(256, false), 64);
  EXPECT_EQ(layer_wise_shard_divisor(8, true), 8192);
  EXPECT_EQ(layer_wise_shard_divisor(3, true), 65536);
  EXPECT_EQ(layer_wise_shard_divisor(1024, true), 64);
  for (int dp : {1, 2, 3, 5, 6, 8, 12, 64, 96, 1000}) {
    for (bool hb : {false, true}) {
      const std::int64_t shard = layer_wise_shard_divisor(dp, hb);
      EXPECT_EQ(shard % 64, 0);
      EXPECT_EQ(shard * dp % bucket_end_divisor(dp, hb), 0) << dp;
    }
  }
}

}  // namespace
}  // namespace shardwise
