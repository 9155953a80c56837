#include "shardwise/train/data_parallel_checkpoint.hpp"

#include "trainer_guards.hpp"

namespace shardwise {

std::filesystem::path save_data_parallel_checkpoint(const CheckpointSaveRequest& request,
                                                    DistributedDataParallel& ddp,
                                                    const std::vector<ModelTensor>& model,
                                                    optim::Optimizer& optimizer,
                                                    ProcessGroup& group) {
  ddp.finish_all_param_sync();
  train_detail::require_finite_weights(group, model, request.step);
  return save_checkpoint(request, model, optimizer, group);
}

}  // namespace shardwise
