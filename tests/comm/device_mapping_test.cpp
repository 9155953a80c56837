// Rank -> CUDA device mapping by local rank (host logic; no GPU needed).
#include "shardwise/comm/device_mapping.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "shardwise/core/error.hpp"

namespace shardwise {
namespace {

TEST(DeviceMapping, OneDevicePerRankTakesTheLocalRank) {
  EXPECT_EQ(device_for_local_rank(0, 8, DeviceSharing::kOneDevicePerRank), 0);
  EXPECT_EQ(device_for_local_rank(7, 8, DeviceSharing::kOneDevicePerRank), 7);
}

TEST(DeviceMapping, ARankAskingForAMissingDeviceIsNamed) {
  try {
    device_for_local_rank(2, 1, DeviceSharing::kOneDevicePerRank);
    ADD_FAILURE() << "no error";
  } catch (const InvalidArgument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("local rank 2 asks for CUDA device 2"), std::string::npos) << what;
    EXPECT_NE(what.find("has 1 device"), std::string::npos) << what;
  }
  EXPECT_THROW(device_for_local_rank(0, 0, DeviceSharing::kShareDevices), InvalidArgument);
  EXPECT_THROW(device_for_local_rank(-1, 4, DeviceSharing::kShareDevices), InvalidArgument);
}

TEST(DeviceMapping, SharedDevicesWrapAround) {
  EXPECT_EQ(device_for_local_rank(3, 1, DeviceSharing::kShareDevices), 0);
  EXPECT_EQ(device_for_local_rank(5, 2, DeviceSharing::kShareDevices), 1);
}

TEST(DeviceMapping, LocalRankFromTheLaunchersVariables) {
  for (const char* name :
       {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID", "LOCAL_RANK"}) {
    unsetenv(name);
  }
  EXPECT_EQ(local_rank_from_environment(), std::nullopt);
  setenv("LOCAL_RANK", "3", 1);
  EXPECT_EQ(local_rank_from_environment(), 3);
  setenv("OMPI_COMM_WORLD_LOCAL_RANK", "1", 1);  // Open MPI's wins
  EXPECT_EQ(local_rank_from_environment(), 1);
  setenv("OMPI_COMM_WORLD_LOCAL_RANK", "one", 1);
  EXPECT_THROW(local_rank_from_environment(), InvalidArgument);
  unsetenv("OMPI_COMM_WORLD_LOCAL_RANK");
  unsetenv("LOCAL_RANK");
}

}  // namespace
}  // namespace shardwise
