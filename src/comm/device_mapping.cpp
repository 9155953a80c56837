#include "shardwise/comm/device_mapping.hpp"

#include <cstdlib>
#include <string>

#include "shardwise/core/error.hpp"

namespace shardwise {

int device_for_local_rank(int local_rank, int device_count, DeviceSharing sharing) {
  SW_REQUIRE(local_rank >= 0, InvalidArgument, "local rank ", local_rank, " is negative");
  SW_REQUIRE(device_count > 0, InvalidArgument, "local rank ", local_rank,
             " needs a CUDA device but this machine has none");
  if (sharing == DeviceSharing::kShareDevices) return local_rank % device_count;
  SW_REQUIRE(local_rank < device_count, InvalidArgument, "local rank ", local_rank,
             " asks for CUDA device ", local_rank, " but this machine has ", device_count,
             device_count == 1 ? " device" : " devices", " (0..", device_count - 1,
             "); run at most one rank per GPU, or let ranks share GPUs");
  return local_rank;
}

std::optional<int> local_rank_from_environment() {
  for (const char* name :
       {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID", "LOCAL_RANK"}) {
    const char* value = std::getenv(name);
    if (value == nullptr) continue;
    const std::string text(value);
    std::size_t used = 0;
    int rank = -1;
    try {
      rank = std::stoi(text, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    SW_REQUIRE(used == text.size() && !text.empty() && rank >= 0, InvalidArgument, name, "='", text,
               "' is not a local rank (a non-negative integer)");
    return rank;
  }
  return std::nullopt;
}

}  // namespace shardwise
