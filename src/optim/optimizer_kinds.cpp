#include "shardwise/optim/optimizer_kinds.hpp"

#include "shardwise/core/error.hpp"
#include "shardwise/optim/buffer_routing.hpp"
#include "shardwise/optim/distributed_optimizer.hpp"
#include "shardwise/optim/layer_wise_distributed_optimizer.hpp"

namespace shardwise::optim {

namespace {

// layer-wise: LayerWise(Muon) over the buffers the layer-wise layout tags, Distributed(AdamW)
// over the rest; each side owns exactly its tagged buffers.
void build_layer_wise(DistributedDataParallel& ddp, const ChunkOptimizerOptions& o,
                      std::vector<std::unique_ptr<Optimizer>>& out) {
  auto layer_wise = [](const BufferKey& key) {
    return bucket_is_managed_by_layer_wise_optimizer(key, BufferTagging::kTagged,
                                                     AskingOptimizer::kLayerWise);
  };
  auto element_sharded = [](const BufferKey& key) {
    return !bucket_is_managed_by_layer_wise_optimizer(key, BufferTagging::kTagged,
                                                      AskingOptimizer::kElementSharded);
  };
  const bool overlap = o.overlap_param_gather_with_optimizer_step;
  out.push_back(
      std::make_unique<LayerWiseDistributedOptimizer>(ddp, layer_wise, o.muon, o.adamw, overlap));
  out.push_back(std::make_unique<DistributedOptimizer>(ddp, element_sharded, o.adamw, overlap));
}

// distributed: element-sharded AdamW over every buffer (ZeRO-1).
void build_distributed(DistributedDataParallel& ddp, const ChunkOptimizerOptions& o,
                       std::vector<std::unique_ptr<Optimizer>>& out) {
  out.push_back(std::make_unique<DistributedOptimizer>(
      ddp, [](const BufferKey&) { return true; }, o.adamw,
      o.overlap_param_gather_with_optimizer_step));
}

// Plain AdamW over whole params of every buffer (every rank holds full all-reduced grads).
std::vector<OptimParam> all_params(const DistributedDataParallel& ddp) {
  std::vector<OptimParam> params;
  for (const auto& buffer : ddp.buffers()) {
    for (const ParamRange& range : buffer->layout().param_index_map) {
      const ParamInfo& info = ddp.params()[range.param];
      const TensorView value = ddp.param(range.param), grad = ddp.main_grad(range.param);
      SW_REQUIRE(value.dtype == DType::kFloat32 && grad.dtype == DType::kFloat32, InvalidArgument,
                 "optimizer 'ddp' steps params in place and needs fp32 params and grads; '",
                 info.name, "' is ", dtype_name(value.dtype), "/", dtype_name(grad.dtype));
      params.push_back(
          OptimParam{info.name, info.shape, value.as<float>(), grad.as<float>(), info.qkv_split});
    }
  }
  return params;
}

// ddp: AdamW on every rank over all-reduced grads.
void build_ddp(DistributedDataParallel& ddp, const ChunkOptimizerOptions& o,
               std::vector<std::unique_ptr<Optimizer>>& out) {
  // Over reduce-scattered grads each rank would step whole params from its own shard's sums.
  SW_REQUIRE(!ddp.config().reduce_scatter_grads(), InvalidArgument,
             "optimizer 'ddp' steps whole params from all-reduced grads, but this "
             "DistributedDataParallel reduce-scatters them (use_distributed_optimizer): wrap the "
             "params for kind 'ddp', or use kind 'distributed'");
  out.push_back(std::make_unique<AdamW>(single_group(all_params(ddp)), o.adamw));
}

// legacy-layer-wise: the plain DDP layout does not tag buffers, so the layer-wise side owns them
// all (ping-pong owners, all_gather_v param sync).
void build_legacy_layer_wise(DistributedDataParallel& ddp, const ChunkOptimizerOptions& o,
                             std::vector<std::unique_ptr<Optimizer>>& out) {
  out.push_back(std::make_unique<LayerWiseDistributedOptimizer>(
      ddp,
      [](const BufferKey& key) {
        return bucket_is_managed_by_layer_wise_optimizer(key, BufferTagging::kUntagged,
                                                         AskingOptimizer::kLayerWise);
      },
      o.muon, o.adamw));
}

constexpr OptimizerKindRecipe kRecipes[] = {
    {OptimizerKind::kLayerWise, LayoutAlgorithm::kLayerWise, false, build_layer_wise},
    {OptimizerKind::kDistributed, LayoutAlgorithm::kDistributed, false, build_distributed},
    {OptimizerKind::kDdp, LayoutAlgorithm::kDefault, false, build_ddp},
    {OptimizerKind::kLegacyLayerWise, LayoutAlgorithm::kDefault, true, build_legacy_layer_wise},
};

}  // namespace

const OptimizerKindRecipe& recipe_of(OptimizerKind kind) {
  for (const OptimizerKindRecipe& recipe : kRecipes) {
    if (recipe.kind == kind) return recipe;
  }
  throw InvalidArgument(
      str_cat("optimizer kind '", to_string(kind), "' has no recipe (optim/optimizer_kinds.cpp)"));
}

}  // namespace shardwise::optim
