// Saving the checkpoint of a data-parallel model: the one save path of `shardwise train` (at
// tp = 1) and of the Python engine (shardwise.torch.save_checkpoint), so both wait for the
// param all-gathers still in flight and both refuse to save weights that are not finite.
#pragma once

#include <filesystem>
#include <vector>

#include "shardwise/checkpoint/checkpoint.hpp"
#include "shardwise/comm/process_group.hpp"
#include "shardwise/ddp/distributed_data_parallel.hpp"
#include "shardwise/optim/optimizer.hpp"

namespace shardwise {

// Finishes `ddp`'s param sync (rank 0 must hold the current weights), throws
// NonFiniteTrainingError on every rank of `group` when a weight of `model` is NaN or infinite on
// any rank (nothing is written then), and saves `request` with save_checkpoint. `model`: the
// params as complete views into `ddp`'s param buffer.
std::filesystem::path save_data_parallel_checkpoint(const CheckpointSaveRequest& request,
                                                    DistributedDataParallel& ddp,
                                                    const std::vector<ModelTensor>& model,
                                                    optim::Optimizer& optimizer,
                                                    ProcessGroup& group);

}  // namespace shardwise
