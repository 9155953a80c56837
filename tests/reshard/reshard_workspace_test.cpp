// ReshardWorkspace: blocks handed out in order, reused after reset() while big enough, regrown
// when a later request is bigger; 8-byte aligned.
#include "shardwise/reshard/reshard_workspace.hpp"

#include <gtest/gtest.h>

#include <cstdint>

namespace shardwise {
namespace {

TEST(ReshardWorkspace, BlocksAreReusedInOrderAndRegrownWhenTooSmall) {
  ReshardWorkspace workspace;
  void* a = workspace.take(1000);
  void* b = workspace.take(24);
  EXPECT_NE(a, b);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a) % 8, 0u);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b) % 8, 0u);
  EXPECT_EQ(workspace.bytes_held(), 1000u + 24u);

  workspace.reset();
  EXPECT_EQ(workspace.take(999), a);  // fits the first block
  EXPECT_EQ(workspace.take(17), b);   // rounded up to 24 bytes: still fits
  EXPECT_EQ(workspace.bytes_held(), 1024u);

  workspace.reset();
  workspace.take(8);
  workspace.take(4096);  // the second block is regrown
  EXPECT_EQ(workspace.bytes_held(), 1000u + 4096u);
  void* c = workspace.take(5);  // a third block
  EXPECT_NE(c, nullptr);
  EXPECT_EQ(workspace.bytes_held(), 1000u + 4096u + 8u);
}

}  // namespace
}  // namespace shardwise
