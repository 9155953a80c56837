// The detail behind every_rank_has_own_gpu (private to shardwise_nccl): which ranks share a GPU.
#pragma once

#include <string>

#include "shardwise/comm/process_group.hpp"

namespace shardwise {

// Collective over `host_group`, as every_rank_has_own_gpu: "" when no two ranks name the same
// GPU, else "ranks A and B of group G share GPU <uuid>" (the first such pair).
std::string describe_shared_gpu(const ProcessGroupPtr& host_group, int device);

}  // namespace shardwise
