// MPI backend (Open MPI). Each group owns a duplicated communicator and a worker thread that runs
// its operations in issue order, as PyTorch's ProcessGroupMPI does, so callers overlap compute
// with communication. A program started without mpirun is a world of size 1.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include "shardwise/comm/comm_deadline.hpp"
#include "shardwise/comm/process_group.hpp"

namespace shardwise {

// How reduce_scatter and all_gather move data: kRing, a bandwidth-optimal ring over send/recv
// (each rank sends and receives (p-1)/p of the data); kMpi, the MPI library's collective;
// kAuto, the ring for shards of kRingMinShardBytes and more, where it measured faster
// (bench/comm_collectives.cpp).
enum class CollectiveAlgorithm { kAuto, kRing, kMpi };
inline constexpr std::size_t kRingMinShardBytes = std::size_t{64} << 10;

// Settings of one MPI group. Groups split from a group start with its options.
struct ProcessGroupOptions {
  // The collective watchdog: any one collective, or wait for a send/recv, that has not completed
  // after this many seconds prints what it waited for (operation, group, ranks, sequence number)
  // and aborts the whole job with kCommTimeoutExitCode, as NCCL's watchdog does. Waiting ranks
  // poll with back-off, so a hung job does not burn its cores meanwhile.
  double comm_timeout_seconds = kDefaultCommTimeoutSeconds;
  CollectiveAlgorithm collective_algorithm = CollectiveAlgorithm::kAuto;
};

// Initialises MPI (thread-multiple) if nobody did, and returns the world group. Safe to call more
// than once; MPI is finalised at exit by the library when it initialised it.
ProcessGroupPtr init_mpi_world();
// The same, and sets the world group's options (groups split from it later inherit them).
ProcessGroupPtr init_mpi_world(const ProcessGroupOptions& options);

// Options of an MPI group (InvalidArgument for another kind of group, or a timeout that is not
// a positive number of seconds up to 1e9). Applies to operations that start afterwards.
void set_process_group_options(const ProcessGroupPtr& group, const ProcessGroupOptions& options);
ProcessGroupOptions process_group_options(const ProcessGroupPtr& group);

// Builds the DP/TP/PP/EP/expert-DP groups of this rank. Throws InvalidArgument naming the sizes
// when they do not divide the world.
ParallelGroups make_parallel_groups(const ProcessGroupPtr& world, ParallelSizes sizes);

// Aborts every rank of the job with `message` (used when one rank hits an exception so the others
// do not hang in a collective).
[[noreturn]] void abort_world(const std::string& message, int exit_code = 2);

// Runs one rank's main. An exception escaping it is printed (rank-prefixed) and, in a world of
// more than one rank, aborts the whole job with exit code 2 so no other rank hangs in a collective;
// in a world of one rank (or before MPI is initialised) it returns 2 instead.
int run_rank_main(const std::function<int()>& rank_main);

// Splits `parent` (an MPI group) as MPI_Comm_split does: ranks passing the same color form one
// group, ordered by key. A negative color returns nullptr (the rank joins no group). Collective
// over `parent`, queued behind its pending operations.
ProcessGroupPtr split_group(const ProcessGroupPtr& parent, int color, int key,
                            const std::string& name);

}  // namespace shardwise
