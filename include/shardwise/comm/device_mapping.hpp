// Which CUDA device a rank uses: by its local rank (its index among the ranks of its node), so
// ranks of one node spread over its GPUs. With one GPU per rank, local rank r takes device r and a
// rank whose device does not exist is an error naming it; when ranks share GPUs (a one-GPU
// machine running several ranks), local rank r takes device r mod the device count.
#pragma once

#include <optional>

namespace shardwise {

enum class DeviceSharing { kOneDevicePerRank, kShareDevices };

// InvalidArgument naming the rank, the device and the count when `local_rank` is negative, no
// device exists, or (kOneDevicePerRank) local_rank >= device_count.
int device_for_local_rank(int local_rank, int device_count, DeviceSharing sharing);

// The local rank the launcher exported (OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID,
// SLURM_LOCALID or LOCAL_RANK, the first one set); nullopt when none is. InvalidArgument naming
// the variable when its value is not a non-negative integer.
std::optional<int> local_rank_from_environment();

// How many ranks the launcher started on this node (OMPI_COMM_WORLD_LOCAL_SIZE, MPI_LOCALNRANKS,
// SLURM_NTASKS_PER_NODE or LOCAL_WORLD_SIZE, the first one set); nullopt when none is.
// InvalidArgument naming the variable when its value is not a positive integer.
std::optional<int> local_size_from_environment();

}  // namespace shardwise
