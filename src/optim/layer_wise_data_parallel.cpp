#include "shardwise/optim/layer_wise_data_parallel.hpp"

#include <utility>
#include <vector>

#include "shardwise/optim/buffer_routing.hpp"
#include "shardwise/optim/chained_optimizer.hpp"
#include "shardwise/optim/data_parallel_setup.hpp"
#include "shardwise/optim/distributed_optimizer.hpp"
#include "shardwise/optim/layer_wise_distributed_optimizer.hpp"

namespace shardwise::optim {

DataParallelOptimizer make_layer_wise_data_parallel(
    const ParamList& params, FullParamLayout layout, DistributedDataParallelConfig config,
    const DataParallelGroups& groups, const ProcessGroupPtr& world, const MuonOptions& muon,
    const AdamWOptions& adamw, BufferMemoryPtr memory, ShardMathPtr math) {
  config.use_distributed_optimizer = true;  // as the layer-wise mode: grads reduce-scattered
  config.use_legacy_param_sync = false;
  DataParallelOptimizer out;
  out.ddp = std::make_unique<DistributedDataParallel>(params, std::move(layout), config, groups,
                                                      std::move(memory));
  // The layer-wise layout tags buffers, so each side owns exactly its tagged buffers.
  auto layer_wise = [](const BufferKey& key) {
    return bucket_is_managed_by_layer_wise_optimizer(key, BufferTagging::kTagged,
                                                     AskingOptimizer::kLayerWise);
  };
  auto element_sharded = [](const BufferKey& key) {
    return !bucket_is_managed_by_layer_wise_optimizer(key, BufferTagging::kTagged,
                                                      AskingOptimizer::kElementSharded);
  };
  std::vector<std::unique_ptr<Optimizer>> children;
  children.push_back(std::make_unique<LayerWiseDistributedOptimizer>(*out.ddp, layer_wise, muon,
                                                                     adamw, false, math));
  children.push_back(
      std::make_unique<DistributedOptimizer>(*out.ddp, element_sharded, adamw, false, math));
  auto chain = std::make_unique<ChainedOptimizer>(std::move(children));
  chain->set_world_reduce([world](double local) { return all_reduce_sum_exact(*world, local); });
  out.optimizer = std::move(chain);
  return out;
}

}  // namespace shardwise::optim
