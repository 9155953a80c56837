// every_rank_has_own_gpu: true when the ranks' devices are distinct GPUs, false when two ranks
// name one (e.g. two ranks under mpirun on a one-GPU machine), an error for a device that does
// not exist; and an NCCL group asked for a missing device fails on every rank instead of hanging.
#include "nccl/mpi/nccl_test_support.hpp"

namespace shardwise {
namespace {

TEST(GpuOwnership, TrueExactlyWhenRanksHaveDistinctGpus) {
  ProcessGroupPtr world = init_mpi_world();
  const int gpus = nccl_test::visible_gpus();
  if (gpus == 0) GTEST_SKIP() << "no CUDA device: cudaGetDeviceCount() found none";
  // One machine: rank r takes GPU r % gpus, so they are distinct exactly when size <= gpus.
  EXPECT_EQ(every_rank_has_own_gpu(world, nccl_test::device_of_rank(world->rank())),
            world->size() <= gpus);
  // Every rank on GPU 0: shared as soon as there are two ranks.
  EXPECT_EQ(every_rank_has_own_gpu(world, 0), world->size() == 1);
}

TEST(GpuOwnership, MissingDeviceIsAnErrorOnEveryRank) {
  ProcessGroupPtr world = init_mpi_world();
  const int missing = nccl_test::visible_gpus() + 3;
  try {
    every_rank_has_own_gpu(world, world->rank() == 0 ? missing : 0);
    ADD_FAILURE() << "a missing device was accepted";
  } catch (const InvalidArgument& e) {
    const std::string text = e.what();
    EXPECT_NE(text.find("does not exist"), std::string::npos) << text;
  }
}

TEST(GpuOwnership, NcclGroupOnAMissingDeviceFailsOnEveryRank) {
  ProcessGroupPtr world = init_mpi_world();
  const int missing = nccl_test::visible_gpus() + 3;
  const int device = world->rank() == 0 ? missing : nccl_test::device_of_rank(world->rank());
  // Rank 0 names the missing device (InvalidArgument); the others learn of it from the agreement
  // check before anyone waits in ncclCommInitRank (CommError).
  EXPECT_THROW(NcclProcessGroup(world, device), Error);
  NcclOptions bad_timeout;
  bad_timeout.comm_timeout_seconds = -1;
  EXPECT_THROW(NcclProcessGroup(world, 0, bad_timeout), InvalidArgument);
}

// Two ranks on one GPU (mpirun -np 2 on a one-GPU machine): refused on every rank before NCCL
// is asked, with the ranks named.
TEST(GpuOwnership, NcclGroupOnASharedGpuIsRefusedOnEveryRank) {
  ProcessGroupPtr world = init_mpi_world();
  if (nccl_test::visible_gpus() == 0)
    GTEST_SKIP() << "no CUDA device: cudaGetDeviceCount() found none";
  if (world->size() < 2) GTEST_SKIP() << "one rank cannot share a GPU";
  try {
    NcclProcessGroup group(world, 0);
    ADD_FAILURE() << "an NCCL group with every rank on GPU 0 was built";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("ranks 0 and 1 of group " + world->name() + " share GPU"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace shardwise
