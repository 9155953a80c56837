#include "shardwise/optim/data_parallel_setup.hpp"

#include <algorithm>
#include <bit>
#include <set>
#include <string>

#include "shardwise/config/enum_names.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/core/logging.hpp"
#include "shardwise/layout/layout_algorithms.hpp"
#include "shardwise/layout/shard_group_choice.hpp"
#include "shardwise/optim/chained_optimizer.hpp"
#include "shardwise/optim/grad_stats.hpp"
#include "shardwise/optim/mixed_precision.hpp"
#include "shardwise/optim/optimizer_kinds.hpp"

namespace shardwise::optim {

namespace {

// ddp.layer_wise_shard_group_size for one chunk: an explicit S is in `options` already; "auto"
// lays the chunk out for every divisor of dp and takes choose_shard_group_size's pick. Only the
// layer-wise mode has layer-wise buffers; the legacy path has no shard groups.
void resolve_shard_group_size(const ParamList& params, const OptimizerKindRecipe& recipe,
                              const DistributedDataParallelConfig& config, LayoutOptions& options) {
  const int dp = options.data_parallel_size;
  SW_REQUIRE(!recipe.legacy_param_sync || !options.layer_wise_shard_group_size, ConfigError,
             "ddp.layer_wise_shard_group_size = ", config.layer_wise_shard_group_size.name(),
             " at dp ", dp,
             ": the legacy layer-wise path (optimizer legacy-layer-wise) all-reduces "
             "whole grads and has no shard groups; use dp, or optimizer layer-wise");
  if (recipe.layout != LayoutAlgorithm::kLayerWise ||
      !config.automatic_layer_wise_shard_group_size()) {
    return;
  }
  const ShardGroupChoice choice = choose_shard_group_size(params, options);
  log::info("ddp.layer_wise_shard_group_size = auto at dp ", dp, ": S = ", choice.shard_group_size,
            "\n", render_shard_group_table(choice));
  if (choice.shard_group_size != dp) options.layer_wise_shard_group_size = choice.shard_group_size;
}

}  // namespace

std::vector<std::unique_ptr<DistributedDataParallel>> wrap_with_ddp(
    const std::vector<ParamList>& chunks, OptimizerKind kind, DistributedDataParallelConfig config,
    const DataParallelGroups& groups, bool all_layer_wise) {
  const OptimizerKindRecipe& recipe = recipe_of(kind);
  // It shapes layer-wise buffers, which no other kind has: ignoring it hid a mistake.
  SW_REQUIRE(!all_layer_wise || recipe.layout == LayoutAlgorithm::kLayerWise, InvalidArgument,
             "all_layer_wise puts every param in the layer-wise optimizer's buffers; optimizer "
             "kind '",
             to_string(kind), "' has no such buffers");
  // The distributed kinds need grads reduce-scattered; the others all-reduce them and have no
  // buffer all-gather to overlap.
  config.use_distributed_optimizer = is_distributed_optimizer(kind);
  if (config.use_distributed_optimizer) {
    config.use_legacy_param_sync = false;
  } else {
    config.overlap_param_gather = false;
    config.align_param_gather = false;
  }
  if (recipe.legacy_param_sync) config.use_legacy_param_sync = true;
  SW_REQUIRE(groups.data_parallel != nullptr, InvalidArgument,
             "wrap_with_ddp: DataParallelGroups has no data_parallel group");
  const int dp = groups.data_parallel->size();
  const int expert_dp =
      (groups.expert_data_parallel ? groups.expert_data_parallel : groups.data_parallel)->size();
  std::vector<std::unique_ptr<DistributedDataParallel>> out;
  for (const ParamList& params : chunks) {
    LayoutOptions options = config.layout_options(recipe.layout, dp, expert_dp);
    options.all_layer_wise = all_layer_wise;
    resolve_shard_group_size(params, recipe, config, options);
    FullParamLayout layout = compute_full_param_layout(params, options);
    validate_full_layout(params, layout, options);
    out.push_back(
        std::make_unique<DistributedDataParallel>(params, std::move(layout), config, groups));
  }
  return out;
}

std::vector<double> all_gather_exact(ProcessGroup& group, const std::vector<double>& local) {
  // As 64-bit integers: the bits travel unchanged whatever the transport does with floats.
  const auto count = static_cast<std::int64_t>(local.size());
  std::vector<std::int64_t> mine(local.size()), all(local.size() * group.size());
  std::transform(local.begin(), local.end(), mine.begin(),
                 [](double v) { return std::bit_cast<std::int64_t>(v); });
  group
      .all_gather(TensorView{all.data(), count * group.size(), DType::kInt64},
                  TensorView{mine.data(), count, DType::kInt64})
      ->wait();
  std::vector<double> out(all.size());
  std::transform(all.begin(), all.end(), out.begin(),
                 [](std::int64_t v) { return std::bit_cast<double>(v); });
  return out;
}

double all_reduce_sum_exact(ProcessGroup& group, double local_value) {
  double sum = 0;
  for (double v : all_gather_exact(group, {local_value})) sum += v;
  return sum;
}

MuonOptions muon_options(const OptimizerConfig& spec) {
  MuonOptions m;
  m.lr = spec.muon_lr;
  m.weight_decay = spec.weight_decay;
  m.momentum = spec.muon_momentum;
  m.nesterov = spec.muon_nesterov;
  m.newton_schulz.steps = spec.muon_ns_steps;
  m.newton_schulz.coefficients = spec.muon_coefficient_set;
  m.newton_schulz.algorithm = spec.muon_ns_algorithm;
  m.newton_schulz.precision = spec.muon_matmul_precision;
  m.scale_mode = spec.muon_scale_mode;
  m.extra_scale_factor = spec.muon_extra_scale_factor;
  m.split_qkv = spec.muon_split_qkv;
  return m;
}

AdamWOptions adamw_options(const OptimizerConfig& spec) {
  AdamWOptions a;
  a.lr = spec.lr;
  a.weight_decay = spec.weight_decay;
  a.beta1 = spec.adam_beta1;
  a.beta2 = spec.adam_beta2;
  a.eps = spec.adam_eps;
  return a;
}

std::unique_ptr<Optimizer> build_optimizer(
    const OptimizerConfig& spec, const std::vector<DistributedDataParallel*>& chunks,
    const ProcessGroupPtr& world, std::map<std::string, TensorParallelSplit> tensor_parallel) {
  MuonOptions muon = muon_options(spec);
  muon.tensor_parallel = std::move(tensor_parallel);
  auto optimizer = make_optimizer(spec.kind, chunks, muon, adamw_options(spec), world,
                                  spec.overlap_param_gather_with_optimizer_step);
  optimizer->set_step_options({spec.clip_grad, false});
  return optimizer;
}

namespace {

// The grad norm's square under ddp.reproducible_reduction: every rank holds every reduced grad,
// so each sums whole params in ParamId order (sum_of_squares of a param depends only on its
// values) and the figure is the same at any dp and shard layout.
double whole_param_grad_sq_sum(const std::vector<DistributedDataParallel*>& chunks) {
  double total = 0;
  for (const DistributedDataParallel* ddp : chunks) {
    std::vector<ParamId> ids;
    for (const auto& buffer : ddp->buffers()) {
      for (const ParamRange& range : buffer->params()) ids.push_back(range.param);
    }
    std::sort(ids.begin(), ids.end());
    for (ParamId id : ids) {
      const TensorView grad = ddp->main_grad(id);
      total += sum_of_squares(std::span(grad.as<float>(), static_cast<std::size_t>(grad.numel)));
    }
  }
  return total;
}

// Installs whole_param_grad_sq_sum when the chunks use the reproducible reduction; it covers
// the DP group only, so the world must be that group (no tensor parallelism).
void use_reproducible_grad_norm(Optimizer& chain,
                                const std::vector<DistributedDataParallel*>& chunks,
                                const ProcessGroupPtr& world) {
  if (chunks.empty() || !chunks.front()->config().reproducible_reduction) return;
  const int dp = chunks.front()->data_parallel_group()->size();
  SW_REQUIRE(world == nullptr || world->size() == dp, ConfigError,
             "ddp.reproducible_reduction needs the data-parallel group to be the whole world (", dp,
             " of ", world == nullptr ? dp : world->size(),
             " ranks here): tensor parallelism is not supported with it");
  chain.set_global_grad_sq_sum([chunks] { return whole_param_grad_sq_sum(chunks); });
}

// A misspelt name in MuonOptions::tensor_parallel would leave its TP shard orthogonalised alone.
void require_tensor_parallel_names_are_params(const MuonOptions& muon, const Optimizer& chain) {
  if (muon.tensor_parallel.empty()) return;
  const std::set<std::string> params = chain.param_names();
  for (const auto& [name, split] : muon.tensor_parallel) {
    SW_REQUIRE(params.contains(name), InvalidArgument, "MuonOptions::tensor_parallel names '", name,
               "', which is not a param of the model chunks");
  }
}

// Checked over every param of every chunk, which all ranks hold, so all ranks refuse together
// (the main-param copy that would fail holds only this rank's shard).
void require_steppable_dtypes(const std::vector<DistributedDataParallel*>& chunks) {
  for (const DistributedDataParallel* ddp : chunks) {
    for (const ParamInfo& p : ddp->params()) {
      SW_REQUIRE(is_steppable_param_dtype(p.dtype), InvalidArgument, "param '", p.name, "' is ",
                 dtype_name(p.dtype), ": the optimizers step fp32, bf16 and fp16 params");
    }
  }
}

}  // namespace

std::unique_ptr<Optimizer> make_optimizer(OptimizerKind kind,
                                          const std::vector<DistributedDataParallel*>& chunks,
                                          const MuonOptions& muon, const AdamWOptions& adamw,
                                          const ProcessGroupPtr& world,
                                          bool overlap_param_gather_with_optimizer_step) {
  SW_REQUIRE(world != nullptr, InvalidArgument, "make_optimizer: the world process group is null");
  for (std::size_t i = 0; i < chunks.size(); ++i) {
    SW_REQUIRE(chunks[i] != nullptr, InvalidArgument, "make_optimizer: chunk ", i,
               "'s DistributedDataParallel is null");
  }
  require_steppable_dtypes(chunks);
  const OptimizerKindRecipe& recipe = recipe_of(kind);
  const ChunkOptimizerOptions options{muon, adamw, overlap_param_gather_with_optimizer_step};
  std::vector<std::unique_ptr<Optimizer>> children;
  for (DistributedDataParallel* ddp : chunks) recipe.build(*ddp, options, children);
  auto chain = std::make_unique<ChainedOptimizer>(std::move(children));
  require_tensor_parallel_names_are_params(muon, *chain);
  // In 'ddp' every rank holds every grad: the local figures are already global.
  if (shards_optimizer_state(kind)) {
    chain->set_world_reduce([world](double local) { return all_reduce_sum_exact(*world, local); });
  }
  use_reproducible_grad_norm(*chain, chunks, world);
  return chain;
}

}  // namespace shardwise::optim
