// Whether the ranks of a group run on distinct GPUs. NCCL cannot put two ranks of one
// communicator on one GPU, so a job picks the NCCL group when this holds and a host-staged group
// otherwise.
#pragma once

#include "shardwise/comm/process_group.hpp"

namespace shardwise {

// Collective over `host_group`: every rank passes the CUDA device it will use. All-gathers the
// devices' UUIDs (unique across machines) and returns true on every rank when no two ranks name
// the same GPU. Throws InvalidArgument naming `device` when it does not exist on this rank.
bool every_rank_has_own_gpu(const ProcessGroupPtr& host_group, int device);

}  // namespace shardwise
