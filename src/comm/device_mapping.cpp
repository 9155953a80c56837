#include "shardwise/comm/device_mapping.hpp"

#include <cstdlib>
#include <initializer_list>
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

namespace {

// The first of `names` that is set, parsed as an integer >= `minimum`; InvalidArgument naming the
// variable when it is not one.
std::optional<int> integer_from_environment(std::initializer_list<const char*> names, int minimum,
                                            const char* what) {
  for (const char* name : names) {
    const char* value = std::getenv(name);
    if (value == nullptr) continue;
    const std::string text(value);
    std::size_t used = 0;
    int number = minimum - 1;
    try {
      number = std::stoi(text, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    SW_REQUIRE(used == text.size() && !text.empty() && number >= minimum, InvalidArgument, name,
               "='", text, "' is not ", what);
    return number;
  }
  return std::nullopt;
}

}  // namespace

std::optional<int> local_rank_from_environment() {
  return integer_from_environment(
      {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID", "LOCAL_RANK"}, 0,
      "a local rank (a non-negative integer)");
}

std::optional<int> local_size_from_environment() {
  return integer_from_environment({"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS",
                                   "SLURM_NTASKS_PER_NODE", "LOCAL_WORLD_SIZE"},
                                  1, "a count of ranks on this node (a positive integer)");
}

}  // namespace shardwise
