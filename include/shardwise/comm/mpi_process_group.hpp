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

// How reduce_scatter and all_gather move data. kRing: a ring over send/recv; kDirect: every rank
// exchanges shards with every other rank directly, in one round; kSharedMemory: through a
// shared-memory segment of the group (all ranks on one node; shared_memory_collectives.hpp), also
// used for all_reduce; all three move (p-1)/p of the data per rank, the least possible, and reduce
// 16-bit types in fp32. kMpi: the MPI library's collective (Open MPI 4.1's reduce-scatter reduces
// everything on one rank, then scatters). kAuto: kMpi below kP2PMinShardBytes per shard, else
// kSharedMemory when the group's ranks share one node and its segment could be mapped, else
// kDirect. kSharedMemory falls back to kDirect (all_reduce: to MPI) without a segment. Measured
// with bench/comm_collectives.cpp on 2 and 4 ranks of a 2-core node: the point-to-point paths
// were at least as fast as MPI from 4 KiB shards up (3x faster for reduce-scatter at 4 ranks,
// 64 MiB), direct as fast as the ring or faster once ranks outnumber cores (a ring step stalls
// whenever its neighbour is descheduled), and shared memory faster than direct (no MPI
// rendezvous, no receive copy).
enum class CollectiveAlgorithm { kAuto, kRing, kDirect, kMpi, kSharedMemory };
inline constexpr std::size_t kP2PMinShardBytes = std::size_t{4} << 10;

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
// Whether MPI has been initialised in this process (by init_mpi_world or by anyone else) and
// not finalised: lets front ends check that importing them started nothing.
bool mpi_running();

// Options of an MPI group (InvalidArgument for another kind of group, or a timeout that is not
// seconds from 0.1 to 1e9). Applies to operations that start afterwards.
void set_process_group_options(const ProcessGroupPtr& group, const ProcessGroupOptions& options);
ProcessGroupOptions process_group_options(const ProcessGroupPtr& group);

// Whether an MPI group runs its collectives through a shared-memory segment: false until a
// collective that would use one has run (the segment is set up then, collectively), and false
// when it could not be set up (ranks on several nodes, or shm_open / mmap failed).
bool uses_shared_memory_collectives(const ProcessGroupPtr& group);
// Whether that segment's large all-gathers (shards from 256 KiB) copy straight from the peers'
// memory (process_vm_readv: one copy per byte instead of two): only when SHARDWISE_SINGLE_COPY=1
// was set on every rank when the segment was set up and the kernel allows it.
bool uses_single_copy_all_gather(const ProcessGroupPtr& group);

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
